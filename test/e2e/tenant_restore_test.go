//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// tenantRestoreNoticedWithin bounds how long the tenant apiserver may go on
// serving, from its watch cache, the objects of before the restore once the
// restore has completed: the restore marks every older revision compacted,
// so the apiserver's watch on etcd is told so and it lists again.
const tenantRestoreNoticedWithin = 2 * time.Minute

// TestTenantControlPlaneThroughARestore: a tenant apiserver keeps running
// while the cluster under it is restored from a backup, as a platform team
// restores a hosted control plane. Before the backup the tenant has a
// workload whose every acknowledged change its informer shows; one ConfigMap
// exists at the backup and is deleted after it, another is made after it.
// After the restore the apiserver must serve the restored objects, from its
// watch cache as from etcd (the first back, the second gone), within a
// bound, and a new workload's every acknowledged change must reach its
// informer in order: its watches work on the restored cluster.
func TestTenantControlPlaneThroughARestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "tenant-restore", true)
	ns, srv, bucket, secretName := bed.ns, bed.srv, bed.bucket, bed.secret

	name := framework.UniqueName("tenant-restore")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, api.DefaultEtcdVersion))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	tenant := startTenantIn(t, ns, name, framework.TenantAPIServer{})
	kube, err := kubernetes.NewForConfig(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}

	judgeTenantLoad(t, startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "before-the-backup", Namespace: "before-the-backup", Duration: 30 * time.Second}), 3*time.Minute)

	const marks = "restore-marks"
	tenantPut(t, kube, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: marks}})
	backedUp := tenantConfigMap(t, kube, marks, "in-the-backup")
	key := "backups/" + name + ".db"
	backUp(t, ns, name, srv, bucket, key, secretName)
	if err := kube.CoreV1().ConfigMaps(marks).Delete(ctx, backedUp.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantConfigMap(t, kube, marks, "after-the-backup")

	er := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.RestoreSpec{
			BackupStorageType: api.BackupStorageTypeS3,
			RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
				Path: bucket + "/" + key, AWSSecret: secretName, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
			EtcdCluster: api.EtcdClusterRef{Name: name},
		},
	}
	requested := time.Now()
	if _, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := waitRestoreEnd(t, ns, name); st.Phase != api.RestorePhaseCompleted || !st.Succeeded {
		t.Fatalf("the restore ended %s: %+v", st.Phase, st)
	}
	waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	completed := time.Now()
	t.Logf("restored %.1fs after the EtcdRestore was made", completed.Sub(requested).Seconds())

	// What the apiserver serves, from its watch cache (resourceVersion 0) and
	// from etcd (a quorum read): the object of the backup back, the one made
	// after it gone.
	for _, from := range []struct{ what, rv string }{{"its watch cache", "0"}, {"etcd", ""}} {
		var last string
		err := framework.WaitFor(ctx, tenantRestoreNoticedWithin, time.Second, "the tenant to serve the restored objects from "+from.what, func(ctx context.Context) (bool, string, error) {
			list, err := kube.CoreV1().ConfigMaps(marks).List(ctx, metav1.ListOptions{ResourceVersion: from.rv})
			if err != nil {
				return false, err.Error(), nil
			}
			var names []string
			for _, cm := range list.Items {
				names = append(names, cm.Name)
			}
			last = fmt.Sprint(names)
			return slices.Contains(names, "in-the-backup") && !slices.Contains(names, "after-the-backup"), "ConfigMaps " + last, nil
		})
		if err != nil {
			t.Errorf("%v (the apiserver still serves what was there before the restore)", err)
			continue
		}
		t.Logf("the tenant serves the restored objects from %s %.1fs after the restore completed: %s", from.what, time.Since(completed).Seconds(), last)
	}

	judgeTenantLoad(t, startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "after-the-restore", Namespace: "after-the-restore", Duration: 60 * time.Second}), 4*time.Minute)
}

// tenantPut creates obj in the tenant, retrying while the tenant does not
// answer.
func tenantPut(t *testing.T, kube kubernetes.Interface, obj *corev1.Namespace) {
	t.Helper()
	err := framework.WaitFor(t.Context(), time.Minute, time.Second, "namespace "+obj.Name+" in the tenant", func(ctx context.Context) (bool, string, error) {
		_, err := kube.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tenantConfigMap creates the ConfigMap ns/name in the tenant.
func tenantConfigMap(t *testing.T, kube kubernetes.Interface, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"made": time.Now().UTC().Format(time.RFC3339Nano)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
