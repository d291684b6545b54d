package restore

import (
	"fmt"
	"strconv"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The record of a disaster recovery (status.recovery) on the restored
// cluster. The hand-over deletes the old cluster, and with it the record
// etcd-operator wrote there; the re-created cluster gets it back with its
// first status, taken only from what is stored (the restore and its plan), so
// that an operator restarted in between writes the same record.

// recoveryRecord is the status.recovery the re-created cluster starts with,
// version being the etcd version the seed restores with. A restore that
// etcd-operator made to recover the cluster (api.DisasterRecoveryAnnotation)
// is that recovery, completed with the revision the cluster comes back with;
// etcd-operator's own record of it need not have been stored before the old
// cluster went. Any other restore keeps the old cluster's record: an earlier
// recovery is still the last one.
func recoveryRecord(er *api.EtcdRestore, plan *Plan, version string) *api.RecoveryStatus {
	mark, ok := er.Annotations[api.DisasterRecoveryAnnotation]
	if !ok {
		return plan.Cluster.Recovery.DeepCopy()
	}
	lastSeen, _ := strconv.ParseInt(mark, 10, 64)
	rec := &api.RecoveryStatus{
		Time:             er.CreationTimestamp,
		FromBackup:       plan.Backup.Path,
		LastSeenRevision: lastSeen,
	}
	if rec.Time.IsZero() {
		rec.Time = plan.Started
	}
	msg := fmt.Sprintf("Disaster recovery: no member's data was left; EtcdRestore %s re-created the cluster from backup %s", er.Name, plan.Backup.Path)
	rev, lost := plan.Backup.Revision, "writes after the backup are lost"
	if p := plan.Point; p != nil {
		rev = p.Revision
		msg += fmt.Sprintf(", taken at revision %d", p.SnapshotRevision)
		if p.Replays() {
			msg += fmt.Sprintf(", and its archive replayed up to revision %d", p.Revision)
			if p.Time != nil {
				msg += fmt.Sprintf(" (received at %s)", p.Time.UTC().Format(time.RFC3339))
			}
		}
		lost = "writes the archive had not stored when the cluster was lost are lost"
		if p.Shortfall != "" {
			lost = "the archive could not be replayed to its end: " + p.Shortfall + "; later writes are lost"
		}
	}
	if rev > 0 {
		rec.RecoveredRevision = rev
		if plan.Point == nil {
			msg += fmt.Sprintf(", taken at revision %d", rev)
		}
		if bumpsRevision(version) {
			rec.RecoveredRevision += RevisionBump
			msg += fmt.Sprintf(", which comes back as revision %d (moved on so that clients' older revisions read as compacted)", rec.RecoveredRevision)
		}
	}
	rec.Message = msg + "; " + lost
	return rec
}
