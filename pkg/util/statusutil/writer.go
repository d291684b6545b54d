// Package statusutil writes the status of the operators' custom resources, one
// way for EtcdCluster, EtcdBackup and EtcdRestore.
//
// The status subresource is the normal path. Installs made for the original
// etcd-operator may lack it: a CRD without `subresources.status` (hand-made,
// or installed by an operator whose role lacks `<resource>/status`, see
// operatorrun.CRDForRole; the original wrote status with an update of the
// whole object), or a role that grants the resources but not
// `<resource>/status`. The writer then writes status with an update of the
// object, as the original did, and says once per object (a Warning event and
// a log line) what to fix when even that cannot store the status.
package statusutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
)

// Event reasons of the writer's warnings.
const (
	// ReasonStatusSubresourceForbidden: the role lacks <resource>/status.
	ReasonStatusSubresourceForbidden = "StatusSubresourceForbidden"
	// ReasonStatusNotStored: an update of the object did not keep the status.
	ReasonStatusNotStored = "StatusNotStored"
)

// ReprobeInterval is how long the writer keeps writing through an object
// that stores the status before it tries the status subresource again, so
// that a CRD or a role fixed while the operator runs is noticed without a
// restart. After a write through the object that did not store the status
// the next write tries the subresource at once: that write was of no use,
// and a try costs one request.
const ReprobeInterval = 5 * time.Minute

// ErrStatusNotStored is wrapped by the error of a write that the apiserver
// accepted without storing the status written (see Writer.Write).
var ErrStatusNotStored = errors.New("status not stored")

// Object is one of the operators' custom resources.
type Object interface {
	metav1.Object
	runtime.Object
}

// Client is a generated typed client of one namespace, such as
// EtcdV1beta2().EtcdClusters(namespace).
type Client[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// Config describes the resource a Writer writes. T is the object, S its status.
type Config[T Object, S any] struct {
	// Group and Resource name the resource in messages and RBAC rules
	// (etcd.database.coreos.com, etcdclusters); Kind is set on the objects
	// handed to the recorder, whose scheme need not know our types.
	Group, Version, Resource, Kind string
	Client                         func(namespace string) Client[T]
	// Status points into an object's status.
	Status func(T) *S
	// ObservedGeneration, if set, points into a status's observedGeneration.
	// Without the status subresource a status change moves the object's
	// generation; the writer carries an up-to-date observedGeneration along.
	ObservedGeneration func(*S) *int64
	Recorder           record.EventRecorder // nil: no events
	Log                *logrus.Entry
	// Now is replaced by tests; nil means time.Now.
	Now func() time.Time
}

// Writer writes statuses of one resource. It is safe for concurrent use.
type Writer[T Object, S any] struct {
	cfg Config[T, S]

	mu sync.Mutex
	// viaObject: status goes with an update of the object since viaObjectAt.
	viaObject   bool
	viaObjectAt time.Time
	// why the status subresource was last left ("forbidden", "not served"),
	// "" after it stored a status.
	why string
	// warned holds, per reason/namespace/name, the UID of the object last
	// warned about: an object deleted and created again under its name is
	// a new one, and is warned about again.
	warned map[string]types.UID
}

// New makes a Writer.
func New[T Object, S any](cfg Config[T, S]) *Writer[T, S] {
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Writer[T, S]{cfg: cfg, warned: map[string]types.UID{}}
}

// Write stores the status obj carries, with the resourceVersion obj was read
// with: every decision behind the status rests on that read, so a Conflict
// is returned (apierrors.IsConflict) rather than written over, and the caller
// decides again from the fresh object (by its generation, never by comparing
// it with the last object seen). A deleted object gives NotFound. On success
// it returns the object as stored.
//
// A write through the object that the apiserver accepts but that stores
// another status than obj's (a CRD serving the status subresource to a role
// without <resource>/status, a schema that prunes status) returns the object
// as stored together with an error wrapping ErrStatusNotStored: a caller
// that can go on without the status stored tells it with errors.Is.
func (w *Writer[T, S]) Write(ctx context.Context, obj T) (T, error) {
	client := w.cfg.Client(obj.GetNamespace())
	if !w.useObject() {
		out, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		switch {
		case err == nil:
			w.setViaObject(false, "")
			return out, nil
		case apierrors.IsForbidden(err):
			w.setViaObject(true, "forbidden")
			w.warn(obj, ReasonStatusSubresourceForbidden, w.forbiddenMessage(err))
		case apierrors.IsNotFound(err):
			// Either the object is gone or the CRD serves no /status.
			if _, gerr := client.Get(ctx, obj.GetName(), metav1.GetOptions{}); gerr != nil {
				if apierrors.IsNotFound(gerr) {
					return out, err
				}
				return out, fmt.Errorf("read %s %s/%s after its status subresource answered NotFound: %w", w.cfg.Kind, obj.GetNamespace(), obj.GetName(), gerr)
			}
			if w.setViaObject(true, "not served") {
				w.cfg.Log.Infof("the %s CRD serves no status subresource: status is written with an update of the object, as the original etcd-operator did", w.cfg.Resource)
			}
		default:
			return out, err
		}
	}
	return w.writeObject(ctx, client, obj)
}

// writeObject writes the status with an update of the whole object. The
// resourceVersion keeps it from overwriting an edit it did not see.
func (w *Writer[T, S]) writeObject(ctx context.Context, client Client[T], obj T) (T, error) {
	upd := obj.DeepCopyObject().(T)
	if og := w.cfg.ObservedGeneration; og != nil {
		// The write changes the status, so the apiserver moves the
		// generation by one; a status that described the generation read
		// describes the one it is stored under.
		if p := og(w.cfg.Status(upd)); *p == upd.GetGeneration() && upd.GetGeneration() != 0 {
			*p++
		}
	}
	out, err := client.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return out, err
	}
	if !sameStored(*w.cfg.Status(out), *w.cfg.Status(upd)) {
		w.warn(obj, ReasonStatusNotStored, w.notStoredMessage())
		w.reprobe()
		return out, fmt.Errorf("%s %s/%s: the update of the object was accepted, the status in it was not kept: %w",
			w.cfg.Kind, obj.GetNamespace(), obj.GetName(), ErrStatusNotStored)
	}
	return out, nil
}

// sameStored tells whether two statuses are the same once stored: the
// apiserver keeps times to the second, so both are compared as their JSON
// reads back.
func sameStored[S any](a, b S) bool {
	return equality.Semantic.DeepEqual(asStored(a), asStored(b))
}

func asStored[S any](s S) S {
	raw, err := json.Marshal(s)
	if err != nil {
		return s
	}
	var out S
	if err := json.Unmarshal(raw, &out); err != nil {
		return s
	}
	return out
}

// Change applies change to the status of the newest object named, and writes
// it when it changed anything. A conflict is retried from a fresh read: for
// writers whose change holds whatever else changed (a backup's result, the
// restore hand-over's phase). It returns the object as stored, or as read
// when nothing changed; an object of another uid (re-created under the name)
// is left alone and returned as read. A status not stored gives the object
// as stored and an error wrapping ErrStatusNotStored, as Write does.
func (w *Writer[T, S]) Change(ctx context.Context, namespace, name string, uid types.UID, change func(*S)) (T, error) {
	var out T
	client := w.cfg.Client(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		out = cur
		if cur.GetUID() != uid {
			return nil
		}
		upd := cur.DeepCopyObject().(T)
		change(w.cfg.Status(upd))
		if equality.Semantic.DeepEqual(*w.cfg.Status(upd), *w.cfg.Status(cur)) {
			return nil
		}
		out, err = w.Write(ctx, upd)
		return err
	})
	return out, err
}

// useObject tells whether to write through the object; after ReprobeInterval
// the subresource is tried again.
func (w *Writer[T, S]) useObject() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.viaObject && w.cfg.Now().Sub(w.viaObjectAt) < ReprobeInterval
}

// setViaObject records the path and why, and tells whether why changed.
func (w *Writer[T, S]) setViaObject(on bool, why string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := w.why != why
	w.viaObject, w.why = on, why
	if on {
		w.viaObjectAt = w.cfg.Now()
	}
	return changed
}

// reprobe makes the next write try the status subresource first. Why it was
// left is kept, so that the same finding is not reported again.
func (w *Writer[T, S]) reprobe() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.viaObject = false
}

func (w *Writer[T, S]) forbiddenMessage(err error) string {
	return fmt.Sprintf("the operator may not update %s/status (%v); status is written with an update of the %s instead, "+
		"which a CRD serving the status subresource ignores: add the rule "+
		"{apiGroups: [%q], resources: [%q], verbs: [get, update, patch]} to the operator's Role or ClusterRole (see example/rbac/)",
		w.cfg.Resource, err, w.cfg.Kind, w.cfg.Group, w.cfg.Resource+"/status")
}

func (w *Writer[T, S]) notStoredMessage() string {
	w.mu.Lock()
	why := w.why
	w.mu.Unlock()
	if why == "forbidden" {
		// The apiserver authorizes <resource>/status before it looks for
		// the subresource, so a role without the rule cannot tell a CRD
		// that serves it from one whose schema prunes status: name both.
		return fmt.Sprintf("the status of this %s is not stored: either the CRD serves the status subresource, which the operator may not update "+
			"(add the rule {apiGroups: [%q], resources: [%q], verbs: [get, update, patch]} to the operator's Role or ClusterRole, see example/rbac/), "+
			"or the CRD %s.%s has no status subresource and its schema prunes status (apply example/crd/%s.%s.yaml)",
			w.cfg.Kind, w.cfg.Group, w.cfg.Resource+"/status", w.cfg.Resource, w.cfg.Group, w.cfg.Resource, w.cfg.Group)
	}
	return fmt.Sprintf("the status of this %s is not stored: the CRD %s.%s has no status subresource and its schema prunes status; "+
		"apply the CRD of example/crd/ (kubectl apply -f example/crd/%s.%s.yaml)",
		w.cfg.Kind, w.cfg.Resource, w.cfg.Group, w.cfg.Resource, w.cfg.Group)
}

// warn gives a warning once per object, told by its UID, and reason.
func (w *Writer[T, S]) warn(obj T, reason, msg string) {
	key := reason + "/" + obj.GetNamespace() + "/" + obj.GetName()
	w.mu.Lock()
	uid, done := w.warned[key]
	done = done && uid == obj.GetUID()
	w.warned[key] = obj.GetUID()
	w.mu.Unlock()
	if done {
		return
	}
	w.cfg.Log.WithFields(logrus.Fields{"namespace": obj.GetNamespace(), "name": obj.GetName(), "resource": w.cfg.Resource}).Warn(msg)
	if w.cfg.Recorder == nil {
		return
	}
	ref := obj.DeepCopyObject()
	ref.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Group: w.cfg.Group, Version: w.cfg.Version, Kind: w.cfg.Kind})
	w.cfg.Recorder.Event(ref, corev1.EventTypeWarning, reason, msg)
}
