//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// storageClass is the class hack/local-cluster creates for statically made volumes:
// no provisioner, immediate binding.
const storageClass = "standard"

// pvRoot holds the host directories behind the suite's hostPath volumes. The node
// is this machine, so the test can look inside them and remove them.
const pvRoot = "/tmp/etcd-operator-e2e-pv"

// pvGroupLabel ties a test's volumes to its claims through a label selector in the
// claim spec, so parallel tests (and other users of class "standard") never take
// each other's volumes.
const pvGroupLabel = "etcd-operator-e2e/pv-group"

// createHostPathPVs creates n hostPath PersistentVolumes of class standard for one
// test, labelled with group, and removes them and their directories at the end. It
// returns the host directory of each volume by name.
func createHostPathPVs(t *testing.T, group string, n int) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("%s-%d", group, i)
		dir := filepath.Join(pvRoot, name)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{pvGroupLabel: group, framework.NamespaceLabel: "true"}},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              storageClass,
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: new(corev1.HostPathDirectoryOrCreate),
				}},
			},
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := f.Kube.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Logf("cleanup: delete PV %s: %v", name, err)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Logf("cleanup: remove %s: %v", dir, err)
			}
		})
		if _, err := f.Kube.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create PV %s: %v", name, err)
		}
		dirs[name] = dir
	}
	return dirs
}

// claimSpec is the persistentVolumeClaimSpec of a cluster using the group's volumes.
func claimSpec(group string) *corev1.PersistentVolumeClaimSpec {
	return &corev1.PersistentVolumeClaimSpec{
		StorageClassName: new(storageClass),
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("512Mi")},
		},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{pvGroupLabel: group}},
	}
}

// TestMembersKeepTheirDataOnPersistentVolumeClaims is the original's
// TestCreateClusterWithPV: with spec.pod.persistentVolumeClaimSpec every member
// gets its own claim, named like the member and owned by the cluster, bound to its
// own volume, and etcd writes its data there.
func TestMembersKeepTheirDataOnPersistentVolumeClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("pv")
	// One spare volume: a member replaced during bootstrap needs a fresh one.
	dirs := createHostPathPVs(t, "e2e-"+name, 4)
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claimSpec("e2e-" + name)}
	created := createCluster(t, cl)
	logVolumesOnFailure(t, "e2e-"+name)
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/pv", "on disk", dataTimeout); err != nil {
		t.Fatal(err)
	}

	volumes := map[string]string{}
	for _, podName := range pods {
		pod, err := f.Kube.CoreV1().Pods(opNS).Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claim := ""
		for _, v := range pod.Spec.Volumes {
			if v.Name == "etcd-data" && v.PersistentVolumeClaim != nil {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		if claim != podName {
			t.Errorf("pod %s mounts claim %q as etcd-data, want a claim named like the member", podName, claim)
			continue
		}
		pvc, err := f.Kube.CoreV1().PersistentVolumeClaims(opNS).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Errorf("claim of %s: %v", podName, err)
			continue
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim %s is %s, want Bound", claim, pvc.Status.Phase)
		}
		if ref := metav1.GetControllerOf(pvc); ref == nil || ref.UID != created.UID {
			t.Errorf("claim %s is controlled by %+v, want the EtcdCluster %s (uid %s)", claim, ref, name, created.UID)
		}
		if other, dup := volumes[pvc.Spec.VolumeName]; dup {
			t.Errorf("claims %s and %s share volume %s", other, claim, pvc.Spec.VolumeName)
		}
		volumes[pvc.Spec.VolumeName] = claim
		dir, ours := dirs[pvc.Spec.VolumeName]
		if !ours {
			t.Errorf("claim %s is bound to %q, not to one of this test's volumes", claim, pvc.Spec.VolumeName)
			continue
		}
		// etcd's data directory is /var/etcd/data on the volume: its WAL proves the
		// member really writes there rather than to a scratch directory.
		if _, err := os.Stat(filepath.Join(dir, "data", "member", "wal")); err != nil {
			t.Errorf("member %s has no etcd WAL on its volume %s: %v", podName, dir, err)
		}
	}
	expectNoVolumeWasted(t, "e2e-"+name, pods)
}

// expectNoVolumeWasted checks that every volume of the group that was ever claimed
// is held by a member's claim now. A claim created for a member that never came to
// be and then deleted leaves its volume Released: with statically provisioned
// volumes (reclaim policy Retain) that volume is lost to the cluster, with dynamic
// provisioning a disk was made and destroyed for nothing.
func expectNoVolumeWasted(t *testing.T, group string, members []string) {
	t.Helper()
	pvs, err := f.Kube.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{LabelSelector: pvGroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		ref := pv.Spec.ClaimRef
		if ref == nil {
			continue
		}
		if !slices.Contains(members, ref.Name) || pv.Status.Phase != corev1.VolumeBound {
			t.Errorf("volume %s is %s for claim %s, which is no member's (members %v): a claim was made for a member that was never created, and deleted again",
				pv.Name, pv.Status.Phase, ref.Name, members)
		}
	}
}

// logVolumesOnFailure shows, if the test fails, which claim holds each of the
// group's volumes, before the cluster's deletion releases them all. Registered
// after the cluster, so it runs before the cluster's cleanup.
func logVolumesOnFailure(t *testing.T, group string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, err := f.Kubectl(context.Background(), "get", "persistentvolumes", "-l", pvGroupLabel+"="+group, "-o", "wide")
		t.Logf("======== volumes of %s\n%s%v", group, out, errOrEmpty(err))
	})
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
