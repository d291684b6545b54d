//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestChaosDisasterRecoveryFromTheArchive is
// TestChaosDisasterRecoveryFromTheNewestBackup with a backup that keeps a
// continuous archive (a snapshot an hour, the archive every second): every
// member's pod is killed under a checker's load, no member's data is left,
// and the operator's EtcdRestore restores the cluster to the newest change in
// the archive (pointInTime latest), not to the snapshot. The clients lose
// only what the archive had not stored at the loss: every write
// acknowledged before a linearizable read taken a few seconds before the loss,
// once the archive had reached that read's revision, is there after the
// recovery, and so are the keys written after the snapshot. The restore
// replays at least as far as the archive had reported at the loss.
func TestChaosDisasterRecoveryFromTheArchive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "drarchive", true)
	ns := bed.ns

	name, pods := recoverableFromBackup(t, ns, "dra")
	b := bed.createBackup(t, name, "dr/"+name, &api.BackupPolicy{BackupIntervalInSecond: 3600, Archive: &api.BackupArchive{IntervalInSecond: 1}})
	archiveAt := func(ctx context.Context, what string, done func(*api.EtcdBackup) bool) *api.EtcdBackup {
		t.Helper()
		var got *api.EtcdBackup
		err := framework.WaitFor(ctx, backupTimeout, framework.Poll, what, func(ctx context.Context) (bool, string, error) {
			var err error
			if got, err = f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, b.Name, metav1.GetOptions{}); err != nil {
				return false, err.Error(), nil
			}
			return done(got), fmt.Sprintf("%+v", got.Status.Archive), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	snap := archiveAt(ctx, "the snapshot of EtcdBackup "+b.Name+" and its archive", func(b *api.EtcdBackup) bool {
		return b.Status.EtcdRevision > 0 && b.Status.Archive != nil
	})
	// Only the archive holds these: the snapshot was taken before them, and
	// the next is an hour away.
	putKeys(t, ns, name, "/e2e/archived/", 20)

	const scenario, d, settle = "every-emptydir-member-lost-dr-archive", 45 * time.Second, 2 * time.Minute
	// The history cannot be linearizable (what the archive had not stored is
	// gone): the bound below judges the loss, porcupine only reports.
	c := startLoadUntilRecovered(t, ns, name, scenario, d, settle)
	lostEveryMemberThenRecoveredFromTheArchive(t, ns, name, pods, c, scenario, d, settle, snap.Status.EtcdRevision, func(read int64) int64 {
		return archiveAt(ctx, fmt.Sprintf("the archive to hold revision %d", read), func(b *api.EtcdBackup) bool {
			return b.Status.Archive != nil && b.Status.Archive.LastRevision >= read
		}).Status.Archive.LastRevision
	})
}

// TestChaosLongArchiveThroughFaultsThenDisasterRecovery is
// TestChaosDisasterRecoveryFromTheArchive after the archive went through the
// faults it must outlast, under the checker's load all along: etcd's leader
// killed (its emptyDir member replaced), the backup operator's pod killed
// (its Deployment makes another, which takes the Lease over), and the object
// store away for a minute, back on the same address. After each, the archive
// must resume, storing a revision past the one the cluster had when the fault
// ended, with no hole (status.archive.lastGap stays empty). Then every member
// is killed, and disaster recovery must replay the archive to at least what
// it had reported at the loss: the clients lose only what the last chunk
// interval had not stored.
func TestChaosLongArchiveThroughFaultsThenDisasterRecovery(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "archfaults", true)
	ns := bed.ns

	name, _ := recoverableFromBackup(t, ns, "arf")
	b := bed.createBackup(t, name, "dr/"+name, &api.BackupPolicy{BackupIntervalInSecond: 3600, Archive: &api.BackupArchive{IntervalInSecond: 1}})
	// archiveAt waits until done holds of the EtcdBackup. A hole in the archive
	// fails the test at once: nothing in this test may make one. The cluster
	// keeps its whole history (no auto-compaction, the default, and a quota
	// its writes never reach, so no compaction on NOSPACE either), and every
	// fault is shorter than what the archiver can wait through: it resumes
	// from its last stored chunk, whose next revision etcd still holds.
	archiveAt := func(ctx context.Context, timeout time.Duration, what string, done func(*api.EtcdBackup) bool) *api.EtcdBackup {
		t.Helper()
		var got *api.EtcdBackup
		err := framework.WaitFor(ctx, timeout, framework.Poll, what, func(ctx context.Context) (bool, string, error) {
			var err error
			if got, err = f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, b.Name, metav1.GetOptions{}); err != nil {
				return false, err.Error(), nil
			}
			if a := got.Status.Archive; a != nil && a.LastGap != nil {
				return false, "", fmt.Errorf("the archive has a hole: status.archive.lastGap %+v", *a.LastGap)
			}
			return done(got), fmt.Sprintf("%+v", got.Status.Archive), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// resumed waits for the archive to store a revision past the cluster's
	// revision now, at the end of the fault named what.
	resumed := func(what string, end time.Time) {
		t.Helper()
		rev := currentRevision(t, ns, name)
		got := archiveAt(ctx, changeTimeout, fmt.Sprintf("the archive to resume after %s: past revision %d", what, rev), func(b *api.EtcdBackup) bool {
			return b.Status.Archive != nil && b.Status.Archive.LastRevision > rev
		})
		t.Logf("after %s the archive stored revision %d (past %d) %.1fs after the fault ended", what, got.Status.Archive.LastRevision, rev, time.Since(end).Seconds())
	}
	snap := archiveAt(ctx, backupTimeout, "the snapshot of EtcdBackup "+b.Name+" and its archive", func(b *api.EtcdBackup) bool {
		return b.Status.EtcdRevision > 0 && b.Status.Archive != nil
	})
	// Only the archive holds these: the snapshot was taken before them, and
	// the next is an hour away.
	putKeys(t, ns, name, "/e2e/archived/", 20)

	// The workload lasts through the three faults and the loss; settle covers
	// the recovery after it, as in TestChaosDisasterRecoveryFromTheArchive.
	const scenario, d, settle = "archive-through-faults-dr", 6 * time.Minute, 2 * time.Minute
	loadStart := time.Now()
	c := startLoadUntilRecovered(t, ns, name, scenario, d, settle)

	// (1) etcd's leader.
	leader, err := f.Leader(ctx, ns, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.KillPod(ctx, ns, leader.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader %s", leader.Name)
	waitReady(t, ns, name, 3, changeTimeout, leader.Name)
	resumed("the leader's kill", time.Now())

	// (2) The backup operator: the bed's own, in its namespace; the pod that
	// serves the EtcdBackup is the holder of its Lease.
	holder, err := leaseHolder(ctx, ns, "etcd-backup-operator")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.KillPod(ctx, ns, holder); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the backup operator %s", holder)
	// The fault ends when another pod serves the EtcdBackup: what the killed
	// pod's container stored before it stopped is no resumption.
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "another backup operator pod to hold the Lease", func(ctx context.Context) (bool, string, error) {
		now, err := leaseHolder(ctx, ns, "etcd-backup-operator")
		if err != nil {
			return false, err.Error(), nil
		}
		return now != holder, "held by " + now, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	resumed("the backup operator's kill", time.Now())

	// (3) The object store, away for a minute.
	bed.srv.Stop()
	stopped := time.Now()
	pause(t, time.Minute)
	if err := bed.srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the store was away for %.1fs", time.Since(stopped).Seconds())
	resumed("the store's outage", time.Now())

	// (4) Every member, as TestChaosDisasterRecoveryFromTheArchive does.
	if left := d - time.Since(loadStart); left < loadLead {
		t.Fatalf("the faults took %.0fs, leaving %.0fs of the %s workload: the loss would come after it; lengthen it",
			time.Since(loadStart).Seconds(), left.Seconds(), d)
	}
	cur, err := f.ClusterPods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	pods := framework.PodNames(framework.LivePods(cur))
	lostEveryMemberThenRecoveredFromTheArchive(t, ns, name, pods, c, scenario, d, settle, snap.Status.EtcdRevision, func(read int64) int64 {
		return archiveAt(ctx, backupTimeout, fmt.Sprintf("the archive to hold revision %d", read), func(b *api.EtcdBackup) bool {
			return b.Status.Archive != nil && b.Status.Archive.LastRevision >= read
		}).Status.Archive.LastRevision
	})
}

// lostEveryMemberThenRecoveredFromTheArchive is how both disaster
// recoveries from the archive end: after a linearizable read at revision
// read and archiveHolds(read) (the archive's newest revision once it holds
// read), every member is killed under the checker c; the cluster must come
// back through the operator's EtcdRestore of the newest archived change,
// replayed at least to what the archive had reported at the loss, with no
// write acknowledged before the read lost, the watch whole, the 20 keys
// only the archive held there, status.recovery and a DisasterRecovery event
// saying so.
func lostEveryMemberThenRecoveredFromTheArchive(t *testing.T, ns, name string, pods []string, c *framework.Checker, scenario string,
	d, settle time.Duration, snapshotRevision int64, archiveHolds func(read int64) int64) {
	t.Helper()
	ctx := t.Context()
	// Every write acknowledged before this linearizable read has a revision
	// at or below read; once the archive holds read, it holds them all.
	readAt := time.Now()
	ackedBefore := listKeys(t, ns, name, c.Appends())
	read := currentRevision(t, ns, name)
	atLoss := archiveHolds(read)
	lostAt := killEveryMember(t, ns, pods)
	t.Logf("killed every member %v %.1fs after the read at revision %d (%d acknowledged appends); the archive had reported revision %d, the snapshot revision %d",
		pods, lostAt.Sub(readAt).Seconds(), read, len(ackedBefore), atLoss, snapshotRevision)

	// The operator's EtcdRestore is named like the cluster.
	st := waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	waitReady(t, ns, name, 3, changeTimeout, pods...)
	recovered := time.Since(lostAt)
	er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pit := st.PointInTime
	switch {
	case er.Spec.PointInTime == nil || !er.Spec.PointInTime.Latest:
		t.Errorf("the operator's EtcdRestore asks for %+v, want the newest archived change", er.Spec.PointInTime)
	case pit == nil || !pit.Replayed || pit.Revision < atLoss || pit.Revision <= pit.SnapshotRevision || pit.Shortfall != "":
		t.Errorf("status.pointInTime %+v, want the archive replayed at least to revision %d, which it had reported at the loss", pit, atLoss)
	default:
		t.Logf("restored snapshot %s (revision %d) and the archive up to revision %d of its %d: %d revisions, %d changes",
			pit.Snapshot, pit.SnapshotRevision, pit.Revision, pit.ArchiveRevision, pit.Revisions, pit.Events)
	}
	if got, err := f.GetCluster(ctx, ns, name); err != nil {
		t.Fatal(err)
	} else if rec := got.Status.Recovery; rec == nil || rec.FromBackup == "" || !strings.Contains(rec.Message, "archive replayed up to revision") {
		t.Errorf("status.recovery = %+v, want the record of a recovery to the newest archived change", rec)
	} else {
		t.Logf("status.recovery: %s", rec.Message)
	}
	// The history cannot be linearizable (what the archive had not stored is
	// gone): the bound judges the loss, porcupine only reports.
	r := judged(t, scenario, c, checkerWait(d, settle), recovered, func(r checker.Result) error {
		lost := missingKeys(t, ns, name, c.Appends(), ackedBefore)
		switch {
		case len(lost) > 0:
			return fmt.Errorf("%d of the %d writes acknowledged before revision %d, which the archive held at the loss, are lost, e.g. %v",
				len(lost), len(ackedBefore), read, lost[:min(5, len(lost))])
		case r.WatchMissed > 0 || r.WatchOutOfOrder > 0:
			return fmt.Errorf("the watch missed %d acknowledged writes that are there and saw %d out of order: the restore took the revision back",
				r.WatchMissed, r.WatchOutOfOrder)
		}
		return nil
	})
	if !t.Failed() {
		t.Logf("%s: %d acknowledged writes lost, none of the %d acknowledged up to %.1fs before the loss; recovered in %.1fs; linearizable: %s",
			scenario, r.AckedLost, len(ackedBefore), lostAt.Sub(readAt).Seconds(), recovered.Seconds(), r.Linearizable)
	}
	if n := countKeys(t, ns, name, "/e2e/archived/"); n != 20 {
		t.Errorf("%d of the 20 keys written after the snapshot are there: the archive was not replayed", n)
	}
	if !strings.Contains(eventsOf(t, ns, name), "DisasterRecovery") {
		t.Error("no DisasterRecovery event on the cluster")
	}
}
