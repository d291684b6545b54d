// walcheck reads a stopped etcd member's data directory the way etcd does at
// start (the newest snapshot, then the WAL entries after it) and lists the
// etcd v2 requests among those entries, marking the ones etcd 3.6 refuses to
// apply: 3.6 accepts a v2 request from the log only if it is a PUT of a
// member's attributes or of the cluster version (server/etcdserver/
// apply_v2.go, v2ToV3Request) and panics with "detected disallowed v2 WAL
// for stage --v2-deprecation=write-only" on any other.
//
// It backs the measurements in hack/version-move/measure.sh; the operator
// itself never reads a data directory.
//
//	go run ./hack/version-move/walcheck <data-dir>
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/pkg/v3/pbutil"
	"go.etcd.io/etcd/raft/v3/raftpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/wal"
	"go.etcd.io/etcd/server/v3/wal/walpb"
	"go.uber.org/zap"
)

// The two v2 paths etcd 3.6 still converts when it replays an old log.
var (
	memberAttributesPath = regexp.MustCompile(`^/0/members/[[:xdigit:]]{1,16}/attributes$`)
	clusterVersionPath   = "/0/version"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: walcheck <etcd data dir>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "walcheck:", err)
		os.Exit(1)
	}
}

func run(dataDir string) error {
	lg := zap.NewNop()
	walDir := filepath.Join(dataDir, "member", "wal")
	snapDir := filepath.Join(dataDir, "member", "snap")

	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return fmt.Errorf("snapshots recorded in the WAL: %w", err)
	}
	var from walpb.Snapshot
	s, err := snap.New(lg, snapDir).LoadNewestAvailable(walSnaps)
	switch {
	case errors.Is(err, snap.ErrNoSnapshot):
	case err != nil:
		return fmt.Errorf("load snapshot: %w", err)
	default:
		from = walpb.Snapshot{Index: s.Metadata.Index, Term: s.Metadata.Term, ConfState: &s.Metadata.ConfState}
	}
	w, err := wal.OpenForRead(lg, walDir, from)
	if err != nil {
		return fmt.Errorf("open WAL: %w", err)
	}
	defer func() { _ = w.Close() }()
	_, _, ents, err := w.ReadAll()
	if err != nil {
		return fmt.Errorf("read WAL: %w", err)
	}

	var v2, refused int
	for _, e := range ents {
		if e.Type != raftpb.EntryNormal || len(e.Data) == 0 {
			continue
		}
		var v3 etcdserverpb.InternalRaftRequest
		if pbutil.MaybeUnmarshal(&v3, e.Data) {
			continue
		}
		var r etcdserverpb.Request
		if err := r.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("entry %d is neither a v3 nor a v2 request: %w", e.Index, err)
		}
		v2++
		verdict := "accepted by 3.6"
		if r.Method != "PUT" || !memberAttributesPath.MatchString(r.Path) && r.Path != clusterVersionPath {
			verdict = "REFUSED by 3.6"
			refused++
		}
		fmt.Printf("entry %d: v2 %s %s (%s)\n", e.Index, r.Method, r.Path, verdict)
	}
	fmt.Printf("snapshot index %d, %d entries after it, %d v2 requests, %d refused by 3.6\n", from.Index, len(ents), v2, refused)
	return nil
}
