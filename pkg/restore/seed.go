package restore

import (
	"crypto/sha256"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The seed pod's restore steps, run as init containers after check-dns.
const (
	// Binary is the restore operator's command; the fetch runs it from the
	// operator's own image, so no third-party image (the original used tutum/curl)
	// is ever pulled into a member pod.
	Binary = "etcd-restore-operator"
	// FetchSubcommand downloads and checks the backup: `etcd-restore-operator fetch-backup`.
	FetchSubcommand = "fetch-backup"

	FetchContainerName   = "fetch-backup"
	RestoreContainerName = "restore-datadir"
	ReplayContainerName  = "replay-archive"

	// The backup is downloaded to a volume of its own rather than next to the data
	// directory: with PVC members the data volume is the member's claim, which must
	// not carry a second copy of the database for the member's whole life.
	backupVolumeName = "restore-backup"
	backupMountDir   = "/var/etcd-restore"
	// BackupFile is where the seed keeps the downloaded snapshot.
	BackupFile = backupMountDir + "/latest.backup"
	// restoreStepBinary is the operator's binary, copied by fetch-backup for
	// the restore step to run from the etcd image (see datadir.go).
	restoreStepBinary = backupMountDir + "/" + Binary
	// restoreStagingDir is where the etcd tool restores to, on the data
	// volume, before the restore step renames it to the data directory.
	restoreStagingDir = k8sutil.EtcdDataDir + ".restoring"
	// replayDir is where restore-datadir puts the snapshot of a restore to a
	// point, for replay-archive to replay onto and rename to the data
	// directory: the member's etcd never starts on a snapshot not yet
	// brought to the point.
	replayDir = k8sutil.EtcdDataDir + ".replaying"
	// etcdBinary is etcd in the etcd images.
	etcdBinary = "/usr/local/bin/etcd"

	// The key of an encrypted backup reaches fetch-backup only, as a file of
	// the Secret's volume: not through the backup server, which has no
	// authentication, and not in the pod's spec or environment.
	keyVolumeName = "restore-key"
	keyMountDir   = "/var/etcd-restore-key"
	// KeyFile is where fetch-backup reads the key.
	KeyFile = keyMountDir + "/" + api.EncryptionKeySecretKey
)

// SeedConfig is everything the seed pod of a restored cluster is made of.
type SeedConfig struct {
	// Cluster is the re-created EtcdCluster, as stored (the pod's owner needs its UID).
	Cluster *api.EtcdCluster
	// RestoreName names the EtcdRestore, for the pod's annotation.
	RestoreName string
	// MemberName is the seed's member, pod and host name (SeedMemberName).
	MemberName string
	// BackupURL is where the fetch downloads the backup: the restore operator's
	// backup server, through its Service.
	BackupURL string
	// Backup is the verified object; its size and sha256 are checked again after
	// the download.
	Backup VerifiedBackup
	// FetchImage is the restore operator's own image; FetchPullPolicy its policy.
	FetchImage      string
	FetchPullPolicy corev1.PullPolicy
	// FetchTimeout bounds the fetch, retries included.
	FetchTimeout time.Duration
	// KeySecret names the Secret with the key of an encrypted backup.
	KeySecret string
	// TokenSecret holds the restore's token (TokenSecretName), mounted into the
	// fetch step, which presents it to the backup server.
	TokenSecret string
	// Token, when TokenSecret is empty, is the restore's token itself, kept on
	// the EtcdRestore (a role that may not create Secrets): handed to the
	// fetch step in TokenEnv.
	Token string
	// Point is the plan of a restore to a point; when it replays the
	// archive, the replay step follows the restore step and gets the archive
	// from ArchiveURL.
	Point      *PointPlan
	ArchiveURL string
}

// memberNameAlphabet is the alphabet of the random suffix of member names (that of
// k8s.io/apimachinery/pkg/util/rand): no vowels, no look-alike characters.
const memberNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// SeedMemberName is "<cluster>-<10 characters>" like every member name, but the
// suffix is derived from the EtcdRestore's UID instead of drawn at random: a
// restarted operator, or a second one watching the same namespace, that does not
// see the seed yet creates the same pod again and gets AlreadyExists, never a
// second seed that would bootstrap a second one-member cluster.
func SeedMemberName(cluster string, restoreUID types.UID) string {
	sum := sha256.Sum256([]byte(restoreUID))
	suffix := make([]byte, 10)
	for i := range suffix {
		suffix[i] = memberNameAlphabet[int(sum[i])%len(memberNameAlphabet)]
	}
	return cluster + "-" + string(suffix)
}

// NewSeedPod builds the seed of a restored cluster: the pod of a new one-member
// cluster whose data directory is filled from the backup before etcd starts.
// After check-dns, fetch-backup downloads the snapshot from the backup server and
// checks its size and sha256; restore-datadir unpacks it into the data directory
// with the etcd image's own tool (etcdutl from 3.5, `etcdctl snapshot restore`
// before), which checks the snapshot's integrity trailer once more. Neither needs
// a shell: the etcd images are distroless. The pod is otherwise exactly the
// member pod etcd-operator would build, so it adopts it as the seed member.
//
// Both steps run again when the kubelet starts the pod afresh long after the
// restore (see datadir.go): they find the data directory and do nothing. The
// restore's Secrets (its token, and the key of an encrypted backup) are
// optional volumes: the fetch alone needs them, while the seed stays a member
// for the cluster's whole life. The token's Secret goes with the EtcdRestore,
// the user may delete the key's, and the kubelet mounts every volume again
// whenever it starts the pod again (after a node reboot): a required Secret
// that is gone would keep the member from starting.
func NewSeedPod(c SeedConfig) *corev1.Pod {
	cl := c.Cluster.WithDefaults()
	m := new(k8sutil.MemberOf(cl, c.MemberName))
	// etcd ignores --initial-cluster* once its data directory exists; they are
	// given to the restore, which writes the membership into it.
	token := string(cl.UID) + "-restored"
	resources := cl.Spec.Pod.Resources.DeepCopy()

	backupMount := corev1.VolumeMount{Name: backupVolumeName, MountPath: backupMountDir}
	fetchArgs := FetchArgs{URL: c.BackupURL, Out: BackupFile, Size: c.Backup.Size, SHA256: c.Backup.SHA256, Timeout: c.FetchTimeout,
		DataDir: k8sutil.EtcdDataDir, CopySelf: restoreStepBinary}
	// The data volume is there for fetch-backup to see whether the restore
	// ran before (see datadir.go).
	readOnlyData := k8sutil.EtcdDataVolumeMount()
	readOnlyData.ReadOnly = true
	fetchMounts := []corev1.VolumeMount{backupMount, readOnlyData}
	volumes := []corev1.Volume{{
		Name:         backupVolumeName,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
	}}
	if c.KeySecret != "" {
		fetchArgs.KeyFile = KeyFile
		fetchMounts = append(fetchMounts, corev1.VolumeMount{Name: keyVolumeName, MountPath: keyMountDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: keyVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: c.KeySecret,
			Items:      []corev1.KeyToPath{{Key: api.EncryptionKeySecretKey, Path: api.EncryptionKeySecretKey}},
			Optional:   new(true),
		}}})
	}
	if c.TokenSecret != "" {
		fetchArgs.TokenFile = tokenFile
	}
	fetch := corev1.Container{
		Name:                     FetchContainerName,
		Image:                    c.FetchImage,
		ImagePullPolicy:          c.FetchPullPolicy,
		Command:                  append([]string{Binary, FetchSubcommand}, fetchArgs.Args()...),
		Resources:                *resources,
		VolumeMounts:             fetchMounts,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// fetch-backup writes only to its volume.
		SecurityContext: k8sutil.ContainerSecurity(),
	}
	if c.TokenSecret != "" {
		fetch.VolumeMounts = append(fetch.VolumeMounts, corev1.VolumeMount{Name: tokenVolume, MountPath: tokenMountDir, ReadOnly: true})
	} else if c.Token != "" {
		fetch.Env = append(fetch.Env, corev1.EnvVar{Name: TokenEnv, Value: c.Token})
	}
	readOnlyBackup := backupMount
	readOnlyBackup.ReadOnly = true
	tool, env := restoreCommand(cl.Spec.Version, m, token)
	dataDirArgs := DataDirArgs{DataDir: k8sutil.EtcdDataDir, StagingDir: restoreStagingDir, Tool: tool}
	if c.Point.Replays() {
		dataDirArgs.OutputDir = replayDir
	}
	cmd := append([]string{restoreStepBinary, RestoreDataDirSubcommand}, dataDirArgs.Args()...)
	restore := corev1.Container{
		Name:                     RestoreContainerName,
		Image:                    api.EtcdImage(cl.Spec.Repository, cl.Spec.Version),
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  cmd,
		Env:                      env,
		Resources:                *resources.DeepCopy(),
		VolumeMounts:             []corev1.VolumeMount{k8sutil.EtcdDataVolumeMount(), readOnlyBackup},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// Restricted like etcd itself: fetch-backup leaves the backup readable
		// by all (mode 0644), so the images of releases that run as root read
		// it without CAP_DAC_OVERRIDE, and the restore writes only the data
		// directory, a volume.
		SecurityContext: k8sutil.EtcdContainerSecurity(cl.Spec.Version),
	}
	steps := []corev1.Container{fetch, restore}
	if c.Point.Replays() {
		steps = append(steps, replayStep(c, cl, restore))
	}
	initialCluster := etcdutil.NewMemberSet(m).PeerURLPairs()
	pod := k8sutil.NewEtcdPod(cl, m, cl.Spec.Version, initialCluster, k8sutil.ClusterStateNew, token,
		k8sutil.WithInitContainers(steps...),
		// A seed that fails has failed the restore: its end is how the
		// restore operator learns it.
		k8sutil.WithRestartPolicy(corev1.RestartPolicyNever),
		k8sutil.WithVolumes(volumes...),
	)
	if c.TokenSecret != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name: tokenVolume,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  c.TokenSecret,
				Items:       []corev1.KeyToPath{{Key: TokenKey, Path: TokenKey}},
				DefaultMode: new(int32(0o444)),
				Optional:    new(true),
			}},
		})
	}
	pod.Annotations[SeedAnnotation] = c.RestoreName
	return pod
}

// replayStep is the replay of a restore to a point (replay.go): the
// operator's binary again, in the etcd image of the restore step, with the
// image's etcd; the token and the key of an encrypted archive as the fetch
// step gets them.
func replayStep(c SeedConfig, cl *api.EtcdCluster, restore corev1.Container) corev1.Container {
	p := c.Point
	a := ReplayArgs{DataDir: k8sutil.EtcdDataDir, ReplayDir: replayDir, URL: c.ArchiveURL, Etcd: etcdBinary, Name: c.MemberName,
		After: p.SnapshotRevision, Revision: p.Revision, ChunksSHA256: p.ChunksSHA256, Keys: p.Keys, KeysSHA256: p.KeysSHA256,
		Newest: p.Point.Latest, Limits: replayLimitsOf(&cl.Spec), Timeout: c.FetchTimeout}
	if bumpsRevision(cl.Spec.Version) {
		a.RevisionBump = RevisionBump
	}
	replay := *restore.DeepCopy()
	replay.Name = ReplayContainerName
	replay.Env = nil
	if c.KeySecret != "" {
		a.KeyFile = KeyFile
		replay.VolumeMounts = append(replay.VolumeMounts, corev1.VolumeMount{Name: keyVolumeName, MountPath: keyMountDir, ReadOnly: true})
	}
	if c.TokenSecret != "" {
		a.TokenFile = tokenFile
		replay.VolumeMounts = append(replay.VolumeMounts, corev1.VolumeMount{Name: tokenVolume, MountPath: tokenMountDir, ReadOnly: true})
	} else if c.Token != "" {
		replay.Env = []corev1.EnvVar{{Name: TokenEnv, Value: c.Token}}
	}
	replay.Command = append([]string{restoreStepBinary, ReplaySubcommand}, a.Args()...)
	return replay
}

// RevisionBump is how far the restore moves the store's revision past the
// backup's. The cluster that was lost went on past the backup, and its clients
// hold revisions from there: a watch that resumes from one (clientv3 resumes
// every watch by itself after a reconnect) must not silently wait on a
// restored cluster that counts those numbers again, and then receive other
// writes under them. It must exceed what the lost cluster wrote after the
// backup, which no one knows after a disaster: a billion, as etcd's and
// Kubernetes' restore guides use, leaves room for 9 billion restores in an int64.
const RevisionBump = 1_000_000_000

// restoreCommand unpacks BackupFile into restoreStagingDir as member m; the
// restore step (RestoreDataDir) runs it and then renames that to the data
// directory. etcdutl
// took over `snapshot restore` in 3.5 (etcdctl's is deprecated there and gone in
// 3.6); before 3.5 only etcdctl has it, and 3.2/3.3 need ETCDCTL_API=3 for it.
// Where the tool can, the revision is bumped past the lost cluster's and every
// revision up to the bump marked compacted, so that a watch or read from an old
// revision fails with "compacted" (the client re-lists) instead of seeing
// revisions go back.
func restoreCommand(version string, m *etcdutil.Member, token string) ([]string, []corev1.EnvVar) {
	tool := "/usr/local/bin/etcdutl"
	var env []corev1.EnvVar
	if v, err := etcdversion.Parse(version); err == nil && !v.Release().Etcdutl {
		tool = "/usr/local/bin/etcdctl"
		env = []corev1.EnvVar{{Name: "ETCDCTL_API", Value: "3"}}
	}
	cmd := []string{tool, "snapshot", "restore", BackupFile,
		"--data-dir=" + restoreStagingDir,
		"--name=" + m.Name,
		"--initial-cluster=" + fmt.Sprintf("%s=%s", m.Name, m.PeerURL()),
		"--initial-cluster-token=" + token,
		"--initial-advertise-peer-urls=" + m.PeerURL(),
	}
	if bumpsRevision(version) {
		cmd = append(cmd, fmt.Sprintf("--bump-revision=%d", RevisionBump), "--mark-compacted")
	}
	return cmd, env
}

// bumpsRevision says whether the restore of a cluster of version moves its
// revision past the backup's (etcdversion.Release.BumpRevision). An unknown
// flag would fail the restore, so older releases restore the backup's
// revision as before.
func bumpsRevision(version string) bool {
	v, err := etcdversion.Parse(version)
	return err == nil && v.Release().BumpRevision.In(v)
}
