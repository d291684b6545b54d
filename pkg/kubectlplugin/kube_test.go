package kubectlplugin

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/google/go-cmp/cmp"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	etcdfake "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// kubeFixture is a cluster "example" of three member pods example-m0..2 in
// fake clientsets only, for the commands that use the Kubernetes API alone;
// beside it a cluster "other" with its member other-m0, and a pod
// "example-stranger" that carries example's labels without being its.
type kubeFixture struct {
	plugin  *Plugin
	kube    *kubefake.Clientset
	etcd    *etcdfake.Clientset
	cluster *api.EtcdCluster
}

func newKubeFixture(t *testing.T, change func(*api.EtcdCluster), extra ...runtime.Object) *kubeFixture {
	t.Helper()
	cluster := &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: ns, UID: types.UID("uid-example")},
		Spec:       api.ClusterSpec{Size: 3, Version: "3.5.21"},
	}
	if change != nil {
		change(cluster)
	}
	other := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns, UID: types.UID("uid-other")}}
	var kubeObjs []runtime.Object
	for _, name := range []string{"example-m0", "example-m1", "example-m2"} {
		kubeObjs = append(kubeObjs, memberPodOf(cluster, name))
	}
	kubeObjs = append(kubeObjs, memberPodOf(other, "other-m0"), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "example-stranger", Namespace: ns, Labels: k8sutil.ClusterLabels("example")},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	})
	var etcdObjs []runtime.Object
	for _, o := range extra {
		if _, ok := o.(*corev1.Pod); ok {
			kubeObjs = append(kubeObjs, o)
		} else if _, ok := o.(*corev1.Secret); ok {
			kubeObjs = append(kubeObjs, o)
		} else {
			etcdObjs = append(etcdObjs, o)
		}
	}
	f := &kubeFixture{
		kube:    kubefake.NewSimpleClientset(kubeObjs...),
		etcd:    etcdfake.NewSimpleClientset(append([]runtime.Object{cluster, other}, etcdObjs...)...),
		cluster: cluster,
	}
	f.plugin = &Plugin{Kube: f.kube, Etcd: f.etcd}
	return f
}

func memberPodOf(cluster *api.EtcdCluster, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace, UID: types.UID("uid-" + name),
			Labels: k8sutil.MemberLabels(cluster, name), OwnerReferences: []metav1.OwnerReference{k8sutil.AsOwner(cluster)}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func (f *kubeFixture) stored(t *testing.T) *api.EtcdCluster {
	t.Helper()
	c, err := f.etcd.EtcdV1beta2().EtcdClusters(ns).Get(t.Context(), "example", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPauseAndResume(t *testing.T) {
	tests := []struct {
		name       string
		paused     bool // before
		args       []string
		wantPaused bool
		wantOut    string
		wantPatch  bool
	}{
		{"pause stops the operator and says until when", false, []string{"pause", "example", "-n", ns}, true, "paused: the operator changes nothing in it", true},
		{"resume hands the cluster back", true, []string{"resume", "example", "-n", ns}, false, "resumed: the operator manages it again", true},
		{"pausing a paused cluster changes nothing", true, []string{"pause", "example", "-n", ns}, true, "is paused already", false},
		{"-o name prints the object as kubectl does", false, []string{"pause", "example", "-n", ns, "-o", "name"}, true, "etcdcluster.etcd.database.coreos.com/example\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, func(c *api.EtcdCluster) { c.Spec.Paused = tt.paused; c.Spec.Size = 5 })
			out, _, err := cliRun(t, f.plugin, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			got := f.stored(t)
			if got.Spec.Paused != tt.wantPaused || got.Spec.Size != 5 {
				t.Errorf("stored spec paused=%v size=%d, want paused=%v and the size kept", got.Spec.Paused, got.Spec.Size, tt.wantPaused)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("printed %q, want %q", out, tt.wantOut)
			}
			patched := false
			for _, a := range f.etcd.Actions() {
				patched = patched || a.GetVerb() == "patch"
			}
			if patched != tt.wantPatch {
				t.Errorf("patched = %v, want %v", patched, tt.wantPatch)
			}
		})
	}
}

func TestPauseOutputJSONIsTheStoredCluster(t *testing.T) {
	f := newKubeFixture(t, nil)
	out, _, err := cliRun(t, f.plugin, "pause", "example", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var c api.EtcdCluster
	if err := json.Unmarshal([]byte(out), &c); err != nil || !c.Spec.Paused || c.Kind != "EtcdCluster" {
		t.Fatalf("-o json printed %q (%v)", out, err)
	}
}

func TestPauseOfAMissingCluster(t *testing.T) {
	f := newKubeFixture(t, nil)
	if _, _, err := cliRun(t, f.plugin, "pause", "missing", "-n", ns); err == nil || !strings.Contains(err.Error(), "get EtcdCluster team-a/missing") {
		t.Fatalf("pause of a missing cluster = %v", err)
	}
}

func TestRestart(t *testing.T) {
	onClaim := memberPodOf(&api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: ns, UID: "uid-example"}}, "example-pv")
	onClaim.Spec.Volumes = []corev1.Volume{{Name: k8sutil.EtcdDataVolumeName,
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "example-pv"}}}}
	tests := []struct {
		name    string
		paused  bool
		args    []string
		deleted string // the pod deleted, "" for none
		out     string
		err     string
	}{
		{"a member on a claim is restarted in place", false, []string{"restart", "example", "example-pv", "-n", ns}, "example-pv",
			"the operator restarts example-pv in place: a new pod of the same name on claim example-pv", ""},
		{"a member on an emptyDir is replaced, and the user is told", false, []string{"restart", "example", "example-m1", "-n", ns}, "example-m1",
			"the operator removes the member and adds a new one", ""},
		{"a member of another cluster is refused", false, []string{"restart", "example", "other-m0", "-n", ns}, "",
			"", "pod team-a/other-m0 is not a member of EtcdCluster example"},
		{"a pod with the cluster's labels that the cluster does not own is refused", false, []string{"restart", "example", "example-stranger", "-n", ns}, "",
			"", "pod team-a/example-stranger is not a member of EtcdCluster example"},
		{"a pod that does not exist is an error", false, []string{"restart", "example", "example-m9", "-n", ns}, "",
			"", "get pod team-a/example-m9"},
		{"a paused cluster is refused: nothing would start the member again", true, []string{"restart", "example", "example-m1", "-n", ns}, "",
			"", "`kubectl etcd resume example` first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, func(c *api.EtcdCluster) { c.Spec.Paused = tt.paused }, onClaim.DeepCopy())
			out, _, err := cliRun(t, f.plugin, tt.args...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var deleted []string
			for _, a := range f.kube.Actions() {
				if a.GetVerb() == "delete" {
					deleted = append(deleted, a.(interface{ GetName() string }).GetName())
				}
			}
			if (tt.deleted == "" && len(deleted) > 0) || (tt.deleted != "" && (len(deleted) != 1 || deleted[0] != tt.deleted)) {
				t.Fatalf("deleted %v, want %q", deleted, tt.deleted)
			}
			if !strings.Contains(out, tt.out) {
				t.Errorf("printed %q, want %q", out, tt.out)
			}
		})
	}
}

func TestLogs(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		lines []string
		err   string
	}{
		// The fake clientset answers every log request with "fake logs";
		// example-stranger (example's labels, another owner) must not show.
		{"every member, each line prefixed with its member", []string{"logs", "example", "-n", ns},
			[]string{"[example-m0] fake logs", "[example-m1] fake logs", "[example-m2] fake logs"}, ""},
		{"one member", []string{"logs", "example", "example-m1", "-n", ns, "--tail", "20"}, []string{"[example-m1] fake logs"}, ""},
		{"followed, every member", []string{"logs", "example", "-f", "-n", ns},
			[]string{"[example-m0] fake logs", "[example-m1] fake logs", "[example-m2] fake logs"}, ""},
		{"a member of another cluster is refused", []string{"logs", "example", "other-m0", "-n", ns}, nil, "not a member of EtcdCluster example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, nil)
			out, _, err := cliRun(t, f.plugin, tt.args...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			slices.Sort(got)
			if !slices.Equal(got, tt.lines) {
				t.Fatalf("printed %q, want the lines %q", out, tt.lines)
			}
		})
	}
}

func TestLogOptions(t *testing.T) {
	o := LogOptions{Tail: 20, Since: 90 * time.Second, Follow: true, Previous: true}.podLogOptions()
	if o.Container != "etcd" || *o.TailLines != 20 || *o.SinceSeconds != 90 || !o.Follow || !o.Previous {
		t.Fatalf("pod log options %+v", o)
	}
	if o := (LogOptions{Tail: -1}).podLogOptions(); o.TailLines != nil || o.SinceSeconds != nil {
		t.Fatalf("all lines asked as %+v", o)
	}
}

func TestBackupNow(t *testing.T) {
	at := time.Date(2026, 11, 28, 13, 30, 5, 0, time.UTC)
	nightly := &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec: api.BackupSpec{ClusterName: "example", StorageType: api.BackupStorageTypeS3,
			BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: 86400, MaxBackups: 7, TimeoutInSecond: 120},
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/example", AWSSecret: "aws"}},
			Compression:  "zstd"},
	}
	otherNightly := nightly.DeepCopy()
	otherNightly.Name, otherNightly.Spec.ClusterName = "other-nightly", "other"
	byEndpoint := nightly.DeepCopy()
	byEndpoint.Name, byEndpoint.Spec.ClusterName = "by-endpoint", ""
	byEndpoint.Spec.EtcdEndpoints = []string{"http://example-client." + ns + ".svc:2379"}
	oneShot := nightly.DeepCopy()
	oneShot.Name, oneShot.Spec.BackupPolicy = "before-upgrade", nil
	oneShot.Spec.S3.Path = "bucket/before-upgrade.db"
	scheduled := nightly.DeepCopy()
	scheduled.Spec.BackupPolicy = &api.BackupPolicy{Schedule: "0 2 * * *", TimeZone: "Europe/Berlin",
		Retention: &api.BackupRetention{Daily: 7}, TimeoutInSecond: 120}

	tests := []struct {
		name     string
		existing []runtime.Object
		req      BackupRequest
		want     api.BackupSpec
		err      string
	}{
		{"the cluster's periodic backup is copied as a one-shot, its path dated", []runtime.Object{nightly, otherNightly}, BackupRequest{},
			api.BackupSpec{ClusterName: "example", StorageType: api.BackupStorageTypeS3, BackupPolicy: &api.BackupPolicy{TimeoutInSecond: 120},
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/example-20261128-133005", AWSSecret: "aws"}}, Compression: "zstd"}, ""},
		{"a scheduled backup is the cluster's periodic one, copied without its schedule", []runtime.Object{scheduled, otherNightly}, BackupRequest{},
			api.BackupSpec{ClusterName: "example", StorageType: api.BackupStorageTypeS3, BackupPolicy: &api.BackupPolicy{TimeoutInSecond: 120},
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/example-20261128-133005", AWSSecret: "aws"}}, Compression: "zstd"}, ""},
		{"a periodic backup found by its endpoints", []runtime.Object{byEndpoint}, BackupRequest{},
			api.BackupSpec{EtcdEndpoints: byEndpoint.Spec.EtcdEndpoints, StorageType: api.BackupStorageTypeS3, BackupPolicy: &api.BackupPolicy{TimeoutInSecond: 120},
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/example-20261128-133005", AWSSecret: "aws"}}, Compression: "zstd"}, ""},
		{"--from a one-shot backup copies its spec as it is", []runtime.Object{nightly, oneShot}, BackupRequest{From: "before-upgrade"},
			oneShot.Spec, ""},
		{"S3 from flags", nil, BackupRequest{S3Path: "b/k.db", S3Secret: "aws", S3Endpoint: "http://minio:9000", S3ForcePathStyle: true},
			api.BackupSpec{ClusterName: "example", StorageType: api.BackupStorageTypeS3,
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "b/k.db", AWSSecret: "aws", Endpoint: "http://minio:9000", ForcePathStyle: true}}}, ""},
		{"no periodic backup and no flags", []runtime.Object{otherNightly, oneShot}, BackupRequest{}, api.BackupSpec{}, "has no periodic EtcdBackup to copy"},
		{"two periodic backups: the user chooses", []runtime.Object{nightly, byEndpoint}, BackupRequest{}, api.BackupSpec{}, "several periodic EtcdBackups (by-endpoint, nightly)"},
		{"--from another cluster's backup is refused", []runtime.Object{otherNightly}, BackupRequest{From: "other-nightly"}, api.BackupSpec{}, "backs up another cluster"},
		{"S3 without a secret", nil, BackupRequest{S3Path: "b/k"}, api.BackupSpec{}, "needs --s3-path BUCKET/KEY and --s3-secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, nil, tt.existing...)
			b, err := f.plugin.BackupNow(t.Context(), ns, "example", tt.req, at)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored, err := f.etcd.EtcdV1beta2().EtcdBackups(ns).Get(t.Context(), "example-20261128-133005", metav1.GetOptions{})
			if err != nil || b.Name != stored.Name {
				t.Fatalf("stored %v, %v", stored, err)
			}
			if diff := cmp.Diff(tt.want, stored.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackupCommandWaitsForTheResult(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status api.BackupStatus
		out    string
		err    string
	}{
		{"success", api.BackupStatus{Succeeded: true, BackupPath: "bucket/k", EtcdRevision: 42, BackupSize: 2048, EtcdVersion: "3.5.21"},
			"succeeded: bucket/k, revision 42, 2.0KiB, etcd 3.5.21", ""},
		{"failure", api.BackupStatus{Reason: "access denied"}, "created", "failed: access denied"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, nil)
			// The backup operator's answer: the stored backup gets a status.
			f.etcd.PrependReactor("get", "etcdbackups", func(a k8stesting.Action) (bool, runtime.Object, error) {
				name := a.(k8stesting.GetAction).GetName()
				return true, &api.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Status: tt.status}, nil
			})
			out, _, err := cliRun(t, f.plugin, "backup", "example", "-n", ns, "--s3-path", "bucket/k", "--s3-secret", "aws", "--wait")
			if (tt.err == "" && err != nil) || (tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err))) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
			if !strings.Contains(out, "etcdbackup team-a/example-") || !strings.Contains(out, tt.out) {
				t.Errorf("printed %q, want %q", out, tt.out)
			}
		})
	}
}
