package restore

import (
	"encoding/json"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// Progress that survives the operator when the status does not. A CRD that
// serves the status subresource ignores status in an update of the object, so
// under a role without `etcdrestores/status` (the original's) a restore's
// phase would be lost at every restart of the operator, and a restore that
// had begun to replace the cluster would be taken for one that had not. The
// flow writes the status it could not store into StatusAnnotation, in the
// metadata every role that may update EtcdRestores may write, and reads the
// further-advanced of the two back: phases only move forward.

// StatusAnnotation holds the restore's status, as JSON, when the status
// itself was not stored.
const StatusAnnotation = "etcd.database.coreos.com/restore-status"

// phaseRank orders the phases as a restore goes through them.
func phaseRank(p api.RestorePhase) int {
	switch p {
	case api.RestorePhaseValidating:
		return 1
	case api.RestorePhaseFetching:
		return 2
	case api.RestorePhaseRestoring:
		return 3
	case api.RestorePhaseCompleted, api.RestorePhaseFailed:
		return 4
	}
	return 0
}

// keptStatus is the status kept in StatusAnnotation, if any that parses.
func keptStatus(er *api.EtcdRestore) (api.RestoreStatus, bool) {
	var st api.RestoreStatus
	raw, ok := er.Annotations[StatusAnnotation]
	if !ok || json.Unmarshal([]byte(raw), &st) != nil {
		return st, false
	}
	return st, true
}

// StatusOf is the restore's status as the flow acts on it: the one kept in
// StatusAnnotation unless the stored one is further on. A status stored
// while the annotation exists removes it (updateStatus), so a kept status of
// the same phase is the newer.
func StatusOf(er *api.EtcdRestore) api.RestoreStatus {
	kept, ok := keptStatus(er)
	if ok && phaseRank(kept.Phase) >= phaseRank(er.Status.Phase) {
		return kept
	}
	return er.Status
}

// withKeptStatus is er with StatusOf(er) as its status; er itself when there
// is no kept status.
func withKeptStatus(er *api.EtcdRestore) *api.EtcdRestore {
	st := StatusOf(er)
	if _, ok := keptStatus(er); !ok {
		return er
	}
	out := er.DeepCopy()
	out.Status = st
	return out
}
