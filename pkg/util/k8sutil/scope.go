package k8sutil

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// Reasons of the events that say why an operator leaves a resource alone.
const (
	// ReasonScopeSkipped: the resource is for the other kind of operator.
	ReasonScopeSkipped = "ScopeSkipped"
	// ReasonInvalidScope: the scope annotation has a value no operator takes.
	ReasonInvalidScope = "InvalidScope"
)

// WatchedNamespace is the namespace an operator lists and watches its
// resources in: its own, or every namespace (metav1.NamespaceAll) when it runs
// cluster-wide, where it then takes only the resources annotated for it
// (v1beta2.IsManagedBy).
func WatchedNamespace(own string, clusterWide bool) string {
	if clusterWide {
		return metav1.NamespaceAll
	}
	return own
}

// ScopeNotices tells, once per resource and cause, why an operator skips a
// resource because of its scope annotation. Without it a resource annotated
// "ClusterWide", or meant for the other kind of operator, was left unmanaged
// without a word, and a running cluster annotated later kept a status that
// nobody updated any more.
type ScopeNotices struct {
	recorder    record.EventRecorder
	clusterWide bool
	gvk         schema.GroupVersionKind

	mu   sync.Mutex
	told map[types.UID]string
}

// NewScopeNotices returns the notices of an operator in the given mode for
// resources of kind (EtcdCluster, EtcdBackup, EtcdRestore). recorder may be
// nil: nothing is recorded then.
func NewScopeNotices(recorder record.EventRecorder, clusterWide bool, kind string) *ScopeNotices {
	return &ScopeNotices{recorder: recorder, clusterWide: clusterWide,
		gvk: v1beta2.SchemeGroupVersion.WithKind(kind), told: map[types.UID]string{}}
}

// Managed tells whether the operator manages obj. When it does not, it says
// why in an event on obj, the first time for this cause.
func (n *ScopeNotices) Managed(obj interface {
	metav1.Object
	runtime.Object
}) bool {
	msg, invalid := v1beta2.ScopeMismatch(obj, n.clusterWide)
	n.mu.Lock()
	defer n.mu.Unlock()
	if msg == "" {
		delete(n.told, obj.GetUID())
		return true
	}
	if n.told[obj.GetUID()] == msg {
		return false
	}
	n.told[obj.GetUID()] = msg
	if n.recorder == nil {
		return false
	}
	typ, reason := corev1.EventTypeNormal, ReasonScopeSkipped
	if invalid {
		typ, reason = corev1.EventTypeWarning, ReasonInvalidScope
	}
	// The kind is set on a copy: objects from typed informers carry none,
	// and the recorder needs it for the event's reference.
	ref := obj.DeepCopyObject()
	ref.GetObjectKind().SetGroupVersionKind(n.gvk)
	n.recorder.Event(ref, typ, reason, msg)
	return false
}

// Forget drops what was told about a deleted resource.
func (n *ScopeNotices) Forget(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.told, uid)
}
