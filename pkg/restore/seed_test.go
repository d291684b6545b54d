package restore

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with the current output")

// assertGolden compares obj, as YAML, with testdata/<name>.yaml.
func assertGolden(t *testing.T, name string, obj any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (create it with go test ./pkg/restore -run %s -update): %v", t.Name(), err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got); if the change is intended, run with -update:\n%s", path, diff)
	}
}

// seedConfig has fixed inputs, so golden files change only when the builder does.
func seedConfig(mutate func(*api.EtcdCluster)) SeedConfig {
	cl := &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNamespace, UID: types.UID("3f0c8a52-6b1d-4e7a-9c2f-5d8e1b4a7c60")},
		Spec:       api.ClusterSpec{Size: 3, Version: "3.5.21"},
	}
	if mutate != nil {
		mutate(cl)
	}
	return SeedConfig{
		Cluster:         cl,
		RestoreName:     testCluster,
		MemberName:      SeedMemberName(testCluster, restoreUID),
		BackupURL:       BackupURL(ServiceName, opNamespace, cl.WithDefaults().Spec.Pod.ClusterDomain, testNamespace, testCluster),
		Backup:          VerifiedBackup{Path: testBucket + "/example.db", Size: 12345, SHA256: strings.Repeat("ab", 32)},
		FetchImage:      fetchImage,
		FetchPullPolicy: corev1.PullIfNotPresent,
		FetchTimeout:    20 * time.Minute,
		TokenSecret:     TokenSecretName(restoreUID),
	}
}

func TestSeedPodGolden(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*api.EtcdCluster)
	}{
		{"seed-pod-3.5", nil},
		{"seed-pod-3.4", func(cl *api.EtcdCluster) { cl.Spec.Version = "3.4.23" }},
		{"seed-pod-tls-pvc", func(cl *api.EtcdCluster) {
			cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
				Member:         &api.MemberSecret{PeerSecret: "peer", ServerSecret: "server"},
				OperatorSecret: "operator",
			}}
			cl.Spec.Pod = &api.PodPolicy{
				ClusterDomain: ".cluster.local",
				PersistentVolumeClaimSpec: &corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				},
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertGolden(t, tc.name, NewSeedPod(seedConfig(tc.mutate)))
		})
	}
}

// The parts of the seed that matter most, spelled out so that a careless -update
// cannot bless a broken pod.
func TestSeedPodRestoresBeforeEtcdStarts(t *testing.T) {
	c := seedConfig(nil)
	pod := NewSeedPod(c)
	var names []string
	for _, ic := range pod.Spec.InitContainers {
		names = append(names, ic.Name)
	}
	if want := []string{k8sutil.DNSCheckContainerName, FetchContainerName, RestoreContainerName}; !cmp.Equal(names, want) {
		t.Fatalf("init containers %v, want %v", names, want)
	}
	fetch, restore := pod.Spec.InitContainers[1], pod.Spec.InitContainers[2]
	if fetch.Image != fetchImage {
		t.Errorf("fetch image %s, want the operator's own %s", fetch.Image, fetchImage)
	}
	args := strings.Join(fetch.Command, " ")
	for _, want := range []string{"etcd-restore-operator fetch-backup", "--url=http://etcd-restore-operator.ops.svc:19999/v1/backup/ns/example",
		"--size=12345", "--sha256=" + c.Backup.SHA256, "--out=" + BackupFile} {
		if !strings.Contains(args, want) {
			t.Errorf("fetch command %q lacks %q", args, want)
		}
	}
	tool := restore.Command[slices.Index(restore.Command, "--")+1:]
	if restore.Image != "quay.io/coreos/etcd:v3.5.21" || tool[0] != "/usr/local/bin/etcdutl" {
		t.Errorf("restore step runs %s from %s, want etcdutl from the cluster's etcd image", tool[0], restore.Image)
	}
	if restore.Command[0] == "/bin/sh" || fetch.Command[0] == "/bin/sh" {
		t.Error("a restore step needs a shell, which the distroless etcd images do not have")
	}
	// etcd must come up as the member the restore wrote into the data directory.
	etcdArgs := strings.Join(pod.Spec.Containers[0].Command, " ")
	restoreArgs := strings.Join(restore.Command, " ")
	for _, flagName := range []string{"--name=", "--initial-advertise-peer-urls="} {
		v := flagValue(etcdArgs, flagName)
		if v == "" || flagValue(restoreArgs, flagName) != v {
			t.Errorf("%s differs between etcd (%q) and the restore (%q)", flagName, v, flagValue(restoreArgs, flagName))
		}
	}
	if pod.Name != c.MemberName || pod.Annotations[SeedAnnotation] != testCluster {
		t.Errorf("pod %s with annotations %v", pod.Name, pod.Annotations)
	}
}

func flagValue(args, name string) string {
	for _, a := range strings.Fields(args) {
		if v, ok := strings.CutPrefix(a, name); ok {
			return v
		}
	}
	return ""
}

func TestSeedMemberNameIsStableAndValid(t *testing.T) {
	a := SeedMemberName("example", restoreUID)
	if a != SeedMemberName("example", restoreUID) {
		t.Fatal("the seed name changes between calls: a restarted operator would create a second seed")
	}
	if a == SeedMemberName("example", "another-uid") {
		t.Fatal("two restores got the same seed name")
	}
	suffix, ok := strings.CutPrefix(a, "example-")
	if !ok || len(suffix) != 10 || strings.Trim(suffix, memberNameAlphabet) != "" {
		t.Fatalf("seed name %q is not <cluster>-<10 member-name characters>", a)
	}
}

func TestBackupURL(t *testing.T) {
	tests := []struct{ domain, want string }{
		{"", "http://etcd-restore-operator.ops.svc:19999/v1/backup/ns/example"},
		{".cluster.local", "http://etcd-restore-operator.ops.svc.cluster.local:19999/v1/backup/ns/example"},
		{"cluster.local", "http://etcd-restore-operator.ops.svc.cluster.local:19999/v1/backup/ns/example"},
	}
	for _, tc := range tests {
		if got := BackupURL(ServiceName, opNamespace, tc.domain, testNamespace, testCluster); got != tc.want {
			t.Errorf("domain %q: %s, want %s", tc.domain, got, tc.want)
		}
	}
}

// The key of an encrypted backup reaches fetch-backup, and only it, as a file
// of the Secret's volume.
func TestSeedPodGivesTheKeyToFetchBackupOnly(t *testing.T) {
	c := seedConfig(nil)
	c.Backup.Encrypted = true
	c.KeySecret = "backup-key"
	pod := NewSeedPod(c)
	var keyVolume *corev1.Volume
	for i, v := range pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "backup-key" {
			keyVolume = &pod.Spec.Volumes[i]
		}
	}
	if keyVolume == nil || len(keyVolume.Secret.Items) != 1 || keyVolume.Secret.Items[0].Key != api.EncryptionKeySecretKey {
		t.Fatalf("no volume of the key's secret with its one key: %+v", pod.Spec.Volumes)
	}
	for _, ic := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		mounted := false
		for _, m := range ic.VolumeMounts {
			if m.Name == keyVolume.Name {
				mounted = m.ReadOnly
			}
		}
		hasFlag := strings.Contains(strings.Join(ic.Command, " "), "--"+FetchFlagKeyFile+"="+KeyFile)
		if want := ic.Name == FetchContainerName; mounted != want || hasFlag != want {
			t.Errorf("container %s: key mounted read-only %v, flag %v; want %v", ic.Name, mounted, hasFlag, want)
		}
	}
	if plain := NewSeedPod(seedConfig(nil)); len(plain.Spec.Volumes) != len(pod.Spec.Volumes)-1 {
		t.Errorf("a seed of a backup that is not encrypted has %d volumes, the encrypted one %d", len(plain.Spec.Volumes), len(pod.Spec.Volumes))
	}
}

func TestSeedPodContainersAreRestrictedWithAReadOnlyRoot(t *testing.T) {
	for _, version := range []string{"3.4.23", "3.5.21", "3.6.5"} {
		pod := NewSeedPod(seedConfig(func(cl *api.EtcdCluster) { cl.Spec.Version = version }))
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: container %s has security context %+v", version, c.Name, sc)
			}
		}
	}
}

func TestSeedFetchPresentsTheMountedToken(t *testing.T) {
	c := seedConfig(nil)
	pod := NewSeedPod(c)
	var fetch *corev1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == FetchContainerName {
			fetch = &pod.Spec.InitContainers[i]
		}
	}
	if fetch == nil {
		t.Fatal("no fetch container")
	}
	if !slices.Contains(fetch.Command, "--"+FetchFlagTokenFile+"="+tokenFile) {
		t.Errorf("fetch command %v does not name the token file", fetch.Command)
	}
	mounted := slices.ContainsFunc(fetch.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == tokenVolume && m.MountPath == tokenMountDir && m.ReadOnly
	})
	fromSecret := slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == tokenVolume && v.Secret != nil && v.Secret.SecretName == c.TokenSecret
	})
	if !mounted || !fromSecret {
		t.Errorf("token volume mounted %v, from Secret %s %v", mounted, c.TokenSecret, fromSecret)
	}
	for _, ctr := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if ctr.Name != FetchContainerName && slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == tokenVolume }) {
			t.Errorf("container %s mounts the token too", ctr.Name)
		}
	}
}

// The seed of a cluster whose pods run as non-root is admitted where Pod
// Security "restricted" is enforced, restore step included.
func TestSeedPodMeetsRestrictedWithANonRootSecurityContext(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"3.4.23", "3.5.21", "3.6.5"} {
		pod := NewSeedPod(seedConfig(func(cl *api.EtcdCluster) {
			cl.Spec.Version = version
			cl.Spec.Pod = &api.PodPolicy{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(65532)), FSGroup: new(int64(65532))}}
		}))
		lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
		for _, r := range eval.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec) {
			if !r.Allowed {
				t.Errorf("%s: refused by Pod Security restricted: %s: %s", version, r.ForbiddenReason, r.ForbiddenDetail)
			}
		}
	}
}

// The seed stays a member for the cluster's whole life, while the restore's
// token Secret goes with the EtcdRestore and the user may delete the key's:
// the kubelet mounts every volume again when it starts the pod again (after a
// node reboot), and a required Secret that is gone keeps the pod from starting.
func TestSeedPodSecretVolumesOutliveTheRestoresSecrets(t *testing.T) {
	c := seedConfig(nil)
	c.Backup.Encrypted = true
	c.KeySecret = "backup-key"
	pod := NewSeedPod(c)
	for _, secret := range []string{c.TokenSecret, c.KeySecret} {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == secret })
		if i < 0 {
			t.Errorf("no volume of Secret %s", secret)
			continue
		}
		if opt := pod.Spec.Volumes[i].Secret.Optional; opt == nil || !*opt {
			t.Errorf("the volume of Secret %s is required: once the Secret is gone the seed cannot start again", secret)
		}
	}
}

// The kubelet runs the init containers again when it starts the pod in a new
// sandbox (after a node reboot, on a runtime that keeps no exited containers),
// long after the restore: both steps must see the data directory and leave it,
// fetch-backup before it reads the token or the key, which may be gone.
func TestSeedPodStepsLookForTheDataDirectoryFirst(t *testing.T) {
	c := seedConfig(nil)
	c.Backup.Encrypted = true
	c.KeySecret = "backup-key"
	pod := NewSeedPod(c)
	fetch, restore := pod.Spec.InitContainers[1], pod.Spec.InitContainers[2]

	data := slices.IndexFunc(fetch.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == k8sutil.EtcdDataVolumeName && m.MountPath == k8sutil.EtcdDataMountDir
	})
	if data < 0 || !fetch.VolumeMounts[data].ReadOnly {
		t.Errorf("fetch-backup mounts %+v; want the data volume, read-only, to see whether the restore ran", fetch.VolumeMounts)
	}
	for _, want := range []string{"--" + FetchFlagDataDir + "=" + k8sutil.EtcdDataDir, "--" + FetchFlagCopySelf + "=" + restoreStepBinary} {
		if !slices.Contains(fetch.Command, want) {
			t.Errorf("fetch command %q lacks %q", fetch.Command, want)
		}
	}

	want := []string{restoreStepBinary, RestoreDataDirSubcommand,
		"--" + DataDirFlagDataDir + "=" + k8sutil.EtcdDataDir, "--" + DataDirFlagStagingDir + "=" + restoreStagingDir, "--"}
	if len(restore.Command) <= len(want) || !slices.Equal(restore.Command[:len(want)], want) {
		t.Fatalf("restore command %q, want it to start with %q", restore.Command, want)
	}
	tool := restore.Command[len(want):]
	if !slices.Contains(tool, "--data-dir="+restoreStagingDir) || slices.Contains(tool, "--data-dir="+k8sutil.EtcdDataDir) {
		t.Errorf("the etcd tool %q must restore into the staging directory, not the data directory", tool)
	}
	if filepath.Dir(restoreStagingDir) != filepath.Dir(k8sutil.EtcdDataDir) {
		t.Errorf("staging directory %s is not beside the data directory %s: the rename would cross volumes", restoreStagingDir, k8sutil.EtcdDataDir)
	}
	if !slices.ContainsFunc(restore.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == backupVolumeName && m.MountPath == backupMountDir }) {
		t.Errorf("the restore step does not mount %s, where its binary is", backupMountDir)
	}
}

// A restore to a point adds the replay step after the restore step: the
// snapshot is restored beside the data directory, and only the replay, from
// the same etcd image, makes the data directory of it; it gets the archive
// from the backup server with the token, the key of an encrypted archive, and
// what it must check.
func TestSeedPodOfARestoreToAPointReplaysBeforeEtcdStarts(t *testing.T) {
	c := seedConfig(func(cl *api.EtcdCluster) {
		cl.Spec.Version = "3.6.6"
		cl.Spec.Pod = &api.PodPolicy{EtcdEnv: []corev1.EnvVar{{Name: "ETCD_MAX_TXN_OPS", Value: "1024"}}}
	})
	c.Backup.Encrypted = true
	c.KeySecret = "backup-key"
	c.Point = &PointPlan{SnapshotRevision: 100, Revision: 180, ChunksSHA256: strings.Repeat("c", 64), Keys: 12, KeysSHA256: strings.Repeat("d", 64)}
	c.ArchiveURL = ArchiveURL(ServiceName, opNamespace, "", testNamespace, testCluster)
	pod := NewSeedPod(c)
	var names []string
	for _, ic := range pod.Spec.InitContainers {
		names = append(names, ic.Name)
	}
	if want := []string{k8sutil.DNSCheckContainerName, FetchContainerName, RestoreContainerName, ReplayContainerName}; !cmp.Equal(names, want) {
		t.Fatalf("init containers %v, want %v", names, want)
	}
	restore, replay := pod.Spec.InitContainers[2], pod.Spec.InitContainers[3]
	if !slices.Contains(restore.Command, "--"+DataDirFlagOutputDir+"="+replayDir) {
		t.Errorf("the restore step %v does not restore beside the data directory", restore.Command)
	}
	if replay.Image != restore.Image || replay.Command[0] != restoreStepBinary || replay.Command[1] != ReplaySubcommand {
		t.Errorf("the replay step runs %v from %s, want the copied operator binary from the etcd image %s", replay.Command[:2], replay.Image, restore.Image)
	}
	args := strings.Join(replay.Command, " ")
	for _, want := range []string{
		"--url=http://etcd-restore-operator.ops.svc:19999/v1/archive/ns/example",
		"--data-dir=" + k8sutil.EtcdDataDir, "--replay-dir=" + replayDir, "--etcd=/usr/local/bin/etcd",
		"--name=" + c.MemberName, "--after=100", "--revision=180", "--revision-bump=1000000000",
		"--chunks-sha256=" + c.Point.ChunksSHA256, "--keys=12", "--keys-sha256=" + c.Point.KeysSHA256,
		"--token-file=" + tokenFile, "--key-file=" + KeyFile,
		// The cluster's limits, which the replay's etcd takes.
		"--max-txn-ops=1024", "--quota-backend-bytes=8589934592",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("replay command %q lacks %q", args, want)
		}
	}
	for _, vol := range []string{tokenVolume, keyVolumeName, k8sutil.EtcdDataVolumeMount().Name} {
		if !slices.ContainsFunc(replay.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == vol }) {
			t.Errorf("the replay step does not mount %s", vol)
		}
	}

	// A point at the snapshot itself needs no replay: the seed is the usual one.
	c.Point = &PointPlan{SnapshotRevision: 100, Revision: 100}
	if n := len(NewSeedPod(c).Spec.InitContainers); n != 3 {
		t.Errorf("a restore to a snapshot's own revision has %d init containers, want 3", n)
	}
}
