// Package restore replaces an EtcdCluster with one seeded from a backup, as an
// EtcdRestore asks, without ever deleting a cluster it cannot give back.
//
// The Flow first proves the backup restorable while nothing is touched: the
// spec, the cluster and the credentials are checked, and the backup is read
// through once (VerifySnapshot: it exists, it is as long as the store says, it
// ends with the sha256 etcd appends to every snapshot, and it matches what the
// EtcdBackup that stored it recorded). Only then is a Plan written onto the
// EtcdRestore and the hand-over started: the old cluster and everything it owns
// are deleted, the cluster is created again paused with phase Running (the signal
// for pkg/cluster not to bootstrap it) and the record of its last disaster
// recovery (recoveryRecord), the seed pod (NewSeedPod) downloads the
// verified backup from the operator's backup server (BackupHandler), checks it
// again (Fetch, the `fetch-backup` subcommand of the operator's own binary) and
// restores it with the etcd image's own tool, and the cluster is unpaused for
// etcd-operator to grow back to its size. The restore succeeds when the cluster is
// available at full size.
//
// A restore to a point (spec.pointInTime) plans the point in the same stage
// (point.go): the newest periodic snapshot at or before it, the archive's
// chunks up to it checked for holes and read through, and what the keys they
// touch must hold; the seed gets a replay-archive step (replay.go) that
// replays them with the image's etcd, checks the result against the plan, and
// only then makes the member's data directory.
//
// The flow keeps no state of its own: the phase and the plan on the EtcdRestore
// and the objects it created tell any replica where a restore stands, every step
// can be repeated, and every write to the EtcdRestore is conditional on the
// version read, so an operator that restarts, or a second one on the same
// restore, never undoes what another did.
package restore
