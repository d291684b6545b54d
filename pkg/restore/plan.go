package restore

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// Names the restore operator puts on objects.
const (
	// PlanAnnotation on an EtcdRestore holds its Plan, written before the old
	// cluster is touched. The old cluster is deleted and re-created under the same
	// name, so its spec must be kept somewhere that survives an operator crash in
	// between; the plan also pins the verified backup for the seed pod.
	PlanAnnotation = "etcd.database.coreos.com/restore-plan"
	// Finalizer keeps an EtcdRestore, and so its plan, while the hand-over runs: a
	// restore deleted between the old cluster's deletion and the new one's creation
	// would lose the cluster for good.
	Finalizer = "etcd.database.coreos.com/restore-in-progress"
	// RestoredByAnnotation on the re-created EtcdCluster is the UID of the
	// EtcdRestore that created it: how a restarted operator tells the new cluster
	// from the old one, and from one someone else created in between.
	RestoredByAnnotation = "etcd.database.coreos.com/restored-by"
	// SeedAnnotation on the seed pod names the EtcdRestore that created it.
	SeedAnnotation = "etcd.database.coreos.com/restore-seed"
)

// Plan is everything the hand-over needs once the old cluster starts going away.
type Plan struct {
	// Cluster is the old EtcdCluster as it was when the backup was verified.
	Cluster ClusterRecord `json:"cluster"`
	// Source is the restore's spec at that time; later edits are ignored.
	Source api.RestoreSpec `json:"source"`
	// Backup is the verified object.
	Backup VerifiedBackup `json:"backup"`
	// Point is what a restore to a point (spec.pointInTime) replays onto
	// Backup; nil for a restore of Backup alone.
	Point *PointPlan `json:"point,omitempty"`
	// Started is when the hand-over began; the restore timeout counts from here.
	Started metav1.Time `json:"started"`
	// Seed is the seed pod, once created. After the hand-over etcd-operator may
	// replace it like any member; knowing it existed tells that apart from a
	// cluster that was unpaused before it had its data.
	Seed string `json:"seed,omitempty"`
}

// ClusterRecord is what is kept of the old cluster: what the re-created one copies,
// and the UID that makes sure only that cluster is ever deleted.
type ClusterRecord struct {
	UID             types.UID               `json:"uid"`
	Labels          map[string]string       `json:"labels,omitempty"`
	Annotations     map[string]string       `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	Spec            api.ClusterSpec         `json:"spec"`
	// ClientIP is the old client Service's cluster IP, which the restored
	// cluster's client Service takes again: clients that resolved the name keep
	// an address that works.
	ClientIP string `json:"clientIP,omitempty"`
	// Recovery is the old cluster's status.recovery, the record of its last
	// disaster recovery, which the re-created cluster keeps.
	Recovery *api.RecoveryStatus `json:"recovery,omitempty"`
}

// recordCluster keeps what the restored cluster copies from the old one.
func recordCluster(cl *api.EtcdCluster) ClusterRecord {
	c := cl.DeepCopy()
	return ClusterRecord{
		UID:             c.UID,
		Labels:          c.Labels,
		Annotations:     c.Annotations,
		OwnerReferences: c.OwnerReferences,
		Spec:            c.Spec,
		Recovery:        c.Status.Recovery,
	}
}

// PlanOf reads the plan of an EtcdRestore; ok is false when it has none.
func PlanOf(er *api.EtcdRestore) (p *Plan, ok bool, err error) {
	raw, ok := er.Annotations[PlanAnnotation]
	if !ok {
		return nil, false, nil
	}
	p = &Plan{}
	if err := json.Unmarshal([]byte(raw), p); err != nil {
		return nil, true, fmt.Errorf("annotation %s is not a restore plan: %w", PlanAnnotation, err)
	}
	return p, true, nil
}

func (p *Plan) encode() (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
