package backup

import (
	"context"
	"time"
)

// Job is one backup: where from, where to, and how the objects are named and kept.
type Job struct {
	Source Source
	Store  Store
	// Bucket is only reported, as the first part of Result.Path.
	Bucket string
	// Key is the object key of a one-shot backup, and the base name of periodic ones.
	Key string
	// Periodic names the object "<Key>_v<revision>_<time>" and prunes the
	// older ones by MaxBackups and Tiers (Retention).
	Periodic   bool
	MaxBackups int
	// Tiers, if set, keep the newest backup of the latest hours, days, weeks
	// and months, read in Location (nil is UTC).
	Tiers    *Tiers
	Location *time.Location
	// Codec compresses and encrypts the snapshot; the zero Codec stores etcd's bytes.
	Codec Codec
	// Now is the clock for periodic names; nil means time.Now.
	Now func() time.Time
	// Verify reads the stored snapshot back before pruning (verify.go), through
	// a temporary file in VerifyDir ("" is the system's temporary directory).
	Verify    bool
	VerifyDir string
}

// Result is what a successful Run stored, and what pruning did after it.
type Result struct {
	Snapshot
	// Path is "<bucket>/<key>" of the stored snapshot.
	Path string
	// Pruned are the keys of older periodic backups deleted after this one.
	Pruned []string
	// PruneErr is set when the snapshot was stored but old backups could not all be
	// deleted: the backup itself succeeded and must be reported as such.
	PruneErr error
	// Verified is what reading the snapshot back found, when the job asked for it.
	Verified *Verification
	// VerifyErr is set when the stored snapshot could not be proven restorable;
	// nothing was pruned then.
	VerifyErr error
}

// Run takes the snapshot and, for periodic jobs, prunes old backups. The caller
// bounds ctx with the backup's timeout.
func Run(ctx context.Context, job Job) (*Result, error) {
	now := job.Now
	if now == nil {
		now = time.Now
	}
	name := func(int64) string { return job.Key }
	if job.Periodic {
		name = func(rev int64) string { return PeriodicKey(job.Key, rev, now()) }
	}
	snap, err := SaveEncodedSnapshot(ctx, job.Source, job.Store, job.Codec, name)
	if err != nil {
		return nil, err
	}
	res := &Result{Snapshot: *snap, Path: job.Bucket + "/" + snap.Key}
	if job.Verify {
		if res.Verified, res.VerifyErr = verifyStored(ctx, job, snap); res.VerifyErr != nil {
			// Older backups stay while the newest is in doubt.
			return res, nil
		}
	}
	if job.Periodic {
		r := Retention{MaxBackups: job.MaxBackups, Tiers: job.Tiers, Location: job.Location}
		res.Pruned, res.PruneErr = Prune(ctx, job.Store, job.Key, r)
	}
	return res, nil
}
