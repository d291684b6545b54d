// Package statustest makes a fake clientset answer status writes as an
// apiserver does for installs made for the original etcd-operator: a CRD
// without the status subresource, or a role without <resource>/status.
package statustest

import (
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
)

// WithoutStatusSubresource makes c answer for resource (etcdclusters,
// etcdbackups, etcdrestores) as an apiserver whose CRD serves no /status:
// PUT .../status is NotFound, and an update of the object moves its
// generation when anything but metadata changed. With prune, the CRD's
// schema drops status.
func WithoutStatusSubresource(c *fake.Clientset, resource string, prune bool) {
	gvr := api.SchemeGroupVersion.WithResource(resource)
	c.PrependReactor("update", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		if u.GetSubresource() == "status" {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: api.GroupName, Resource: resource + "/status"}, "")
		}
		obj := u.GetObject().DeepCopyObject()
		meta, err := apimeta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		old, err := c.Tracker().Get(gvr, meta.GetNamespace(), meta.GetName())
		if err != nil {
			return true, nil, err
		}
		oldMeta, err := apimeta.Accessor(old)
		if err != nil {
			return true, nil, err
		}
		if prune {
			clearStatus(obj)
		}
		if !equality.Semantic.DeepEqual(withoutMeta(old), withoutMeta(obj)) {
			meta.SetGeneration(oldMeta.GetGeneration() + 1)
		}
		return true, obj, c.Tracker().Update(gvr, obj, meta.GetNamespace())
	})
}

// ForbidStatus makes c refuse writes of resource/status, as for a role
// written for the original, which granted the resources only.
func ForbidStatus(c *fake.Clientset, resource string) {
	c.PrependReactor("update", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		name := ""
		if m, err := apimeta.Accessor(a.(k8stesting.UpdateAction).GetObject()); err == nil {
			name = m.GetName()
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: api.GroupName, Resource: resource + "/status"}, name, nil)
	})
}

// ForbidServedStatus makes c answer for resource as an apiserver whose CRD
// serves the status subresource (example/crd/) to a role written for the
// original, without <resource>/status: PUT .../status is Forbidden, and an
// update of the object keeps the stored status, whatever status it carries.
// An update that leaves the object as it was is not written, and makes no
// watch event, as the apiserver skips it.
func ForbidServedStatus(c *fake.Clientset, resource string) {
	gvr := api.SchemeGroupVersion.WithResource(resource)
	c.PrependReactor("update", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		meta, err := apimeta.Accessor(u.GetObject())
		if err != nil {
			return true, nil, err
		}
		if u.GetSubresource() == "status" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: api.GroupName, Resource: resource + "/status"}, meta.GetName(), nil)
		}
		old, err := c.Tracker().Get(gvr, meta.GetNamespace(), meta.GetName())
		if err != nil {
			return true, nil, err
		}
		obj := u.GetObject().DeepCopyObject()
		copyStatus(obj, old)
		if equality.Semantic.DeepEqual(content(old), content(obj)) {
			return true, old, nil
		}
		return true, obj, c.Tracker().Update(gvr, obj, meta.GetNamespace())
	})
}

// content is obj as the apiserver stores it, but its type.
func content(obj runtime.Object) map[string]interface{} {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	delete(u, "kind")
	delete(u, "apiVersion")
	return u
}

// withoutMeta is obj's content but metadata, as the apiserver compares it.
func withoutMeta(obj runtime.Object) map[string]interface{} {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	delete(u, "metadata")
	delete(u, "kind")
	delete(u, "apiVersion")
	return u
}

// clearStatus empties obj's status, as a schema without it prunes it.
func clearStatus(obj runtime.Object) {
	switch o := obj.(type) {
	case *api.EtcdCluster:
		o.Status = api.ClusterStatus{}
	case *api.EtcdBackup:
		o.Status = api.BackupStatus{}
	case *api.EtcdRestore:
		o.Status = api.RestoreStatus{}
	}
}

// Events drains the events a FakeRecorder holds.
func Events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// copyStatus sets obj's status to from's, as the apiserver keeps the stored
// status on an update of an object whose CRD serves /status.
func copyStatus(obj, from runtime.Object) {
	switch o := obj.(type) {
	case *api.EtcdCluster:
		o.Status = *from.(*api.EtcdCluster).Status.DeepCopy()
	case *api.EtcdBackup:
		o.Status = *from.(*api.EtcdBackup).Status.DeepCopy()
	case *api.EtcdRestore:
		o.Status = *from.(*api.EtcdRestore).Status.DeepCopy()
	}
}
