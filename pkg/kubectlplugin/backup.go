package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/maintenance"
)

// BackupRequest says where a one-shot backup goes: a copy of an existing
// EtcdBackup's spec (From; or the cluster's only periodic one when nothing
// is given), or an S3 location.
type BackupRequest struct {
	// From names the EtcdBackup whose spec is copied.
	From string
	// S3Path, S3Secret, S3Endpoint and S3ForcePathStyle make an S3 backup.
	S3Path, S3Secret, S3Endpoint string
	S3ForcePathStyle             bool
}

// backupSuffixLayout dates the key and the name of a one-shot backup taken
// from a periodic backup's spec, so that it never writes over a periodic
// backup's keys ("<path>_v<revision>_<time>") or an earlier one-shot.
const backupSuffixLayout = "20060102-150405"

// BackupNow creates a one-shot EtcdBackup of the cluster, taken by the
// backup operator, and returns it as created.
func (p *Plugin) BackupNow(ctx context.Context, namespace, name string, req BackupRequest, at time.Time) (*api.EtcdBackup, error) {
	if _, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	stamp := at.UTC().Format(backupSuffixLayout)
	b := &api.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + stamp, Namespace: namespace,
		Labels: map[string]string{api.LabelClusterName: name}}}
	switch {
	case req.S3Path != "" || req.S3Secret != "":
		if req.From != "" {
			return nil, errors.New("--from and --s3-path are alternatives: copy an EtcdBackup's spec or name an S3 location")
		}
		if req.S3Path == "" || req.S3Secret == "" || !strings.Contains(req.S3Path, "/") {
			return nil, errors.New("an S3 backup needs --s3-path BUCKET/KEY and --s3-secret SECRET")
		}
		b.Spec = api.BackupSpec{ClusterName: name, StorageType: api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: req.S3Path, AWSSecret: req.S3Secret,
				Endpoint: req.S3Endpoint, ForcePathStyle: req.S3ForcePathStyle}}}
	default:
		from, err := p.backupToCopy(ctx, namespace, name, req.From)
		if err != nil {
			return nil, err
		}
		b.Spec = *from.Spec.DeepCopy()
		if pol := b.Spec.BackupPolicy; pol != nil {
			// One-shot: no interval, no retention; the same time bound.
			b.Spec.BackupPolicy = &api.BackupPolicy{TimeoutInSecond: pol.TimeoutInSecond}
			if from.Spec.IsPeriodic() {
				setBackupPath(&b.Spec, func(path string) string { return path + "-" + stamp })
			}
		}
	}
	created, err := p.Etcd.EtcdV1beta2().EtcdBackups(namespace).Create(ctx, b, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create EtcdBackup %s/%s: %w", namespace, b.Name, err)
	}
	return created, nil
}

// backupToCopy is the EtcdBackup named from, which must back up the
// cluster, or the cluster's only periodic EtcdBackup.
func (p *Plugin) backupToCopy(ctx context.Context, namespace, name, from string) (*api.EtcdBackup, error) {
	cluster := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if from != "" {
		b, err := p.Etcd.EtcdV1beta2().EtcdBackups(namespace).Get(ctx, from, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get EtcdBackup %s/%s: %w", namespace, from, err)
		}
		if !backsUpCluster(b, cluster) {
			return nil, fmt.Errorf("EtcdBackup %s/%s backs up another cluster than %s", namespace, from, name)
		}
		return b, nil
	}
	list, err := p.Etcd.EtcdV1beta2().EtcdBackups(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the EtcdBackups of %s: %w", namespace, err)
	}
	var periodic []*api.EtcdBackup
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.IsPeriodic() && backsUpCluster(b, cluster) {
			periodic = append(periodic, b)
		}
	}
	switch len(periodic) {
	case 0:
		return nil, fmt.Errorf("%s/%s has no periodic EtcdBackup to copy: name one with --from, or an S3 location with --s3-path and --s3-secret", namespace, name)
	case 1:
		return periodic[0], nil
	}
	var names []string
	for _, b := range periodic {
		names = append(names, b.Name)
	}
	return nil, fmt.Errorf("%s/%s has several periodic EtcdBackups (%s): choose one with --from", namespace, name, strings.Join(names, ", "))
}

// backsUpCluster tells whether b names the cluster, by clusterName or by
// its endpoints.
func backsUpCluster(b *api.EtcdBackup, c *api.EtcdCluster) bool {
	return b.Spec.ClusterName == c.Name || (b.Spec.ClusterName == "" && backsUp(b, c))
}

// setBackupPath changes the path of the store the spec uses.
func setBackupPath(s *api.BackupSpec, change func(string) string) {
	switch {
	case s.S3 != nil:
		s.S3.Path = change(s.S3.Path)
	case s.ABS != nil:
		s.ABS.Path = change(s.ABS.Path)
	case s.GCS != nil:
		s.GCS.Path = change(s.GCS.Path)
	case s.OSS != nil:
		s.OSS.Path = change(s.OSS.Path)
	}
}

// WaitForBackup polls the EtcdBackup until the backup operator records a
// success or a failure, or timeout passes.
func (p *Plugin) WaitForBackup(ctx context.Context, w io.Writer, namespace, name string, interval, timeout time.Duration) (*api.EtcdBackup, error) {
	var b *api.EtcdBackup
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		b, err = p.Etcd.EtcdV1beta2().EtcdBackups(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get EtcdBackup %s/%s: %w", namespace, name, err)
		}
		return b.Status.Succeeded || b.Status.Reason != "", nil
	})
	if err != nil {
		if wait.Interrupted(err) {
			return b, fmt.Errorf("EtcdBackup %s/%s has no result after %s: is etcd-backup-operator running? (kubectl describe etcdbackup %s -n %s)",
				namespace, name, timeout, name, namespace)
		}
		return b, err
	}
	if !b.Status.Succeeded {
		return b, fmt.Errorf("EtcdBackup %s/%s failed: %s", namespace, name, b.Status.Reason)
	}
	fmt.Fprintf(w, "etcdbackup %s/%s succeeded: %s, revision %d, %s, etcd %s\n", namespace, name,
		b.Status.BackupPath, b.Status.EtcdRevision, maintenance.HumanBytes(b.Status.BackupSize), b.Status.EtcdVersion)
	return b, nil
}

func (c *cli) backupCommand() *cobra.Command {
	var (
		req         BackupRequest
		waitFor     bool
		waitTimeout time.Duration
		out         *objectPrinter
		pollEvery   = 2 * time.Second
	)
	cmd := c.clusterCommand("backup", "Take a backup now: a one-shot EtcdBackup, like the cluster's periodic one or to S3",
		`Create a one-shot EtcdBackup of the cluster, taken by etcd-backup-operator.
Its spec is a copy of an existing EtcdBackup's (--from, or the cluster's only
periodic one; the periodic one's path gets the date, so that no backup is
written over), or an S3 location (--s3-path, --s3-secret). The name of the
new EtcdBackup is printed; --wait waits for its result.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			b, err := p.BackupNow(cmd.Context(), namespace, name, req, time.Now())
			if err != nil {
				return err
			}
			w := out.sentences(c.streams.Out)
			fmt.Fprintf(w, "etcdbackup %s/%s created\n", namespace, b.Name)
			if waitFor {
				if b, err = p.WaitForBackup(cmd.Context(), w, namespace, b.Name, pollEvery, waitTimeout); err != nil {
					return err
				}
			}
			return out.print(b, c.streams.Out)
		})
	f := cmd.Flags()
	f.StringVar(&req.From, "from", "", "the EtcdBackup whose spec to copy (default: the cluster's only periodic one)")
	f.StringVar(&req.S3Path, "s3-path", "", "S3 location BUCKET/KEY, instead of a copied spec")
	f.StringVar(&req.S3Secret, "s3-secret", "", "the secret of AWS credentials and config, with --s3-path")
	f.StringVar(&req.S3Endpoint, "s3-endpoint", "", "an S3-compatible endpoint (MinIO, Ceph), with --s3-path")
	f.BoolVar(&req.S3ForcePathStyle, "s3-force-path-style", false, "path-style bucket addressing, as MinIO and Ceph need")
	f.BoolVar(&waitFor, "wait", false, "wait for the backup's result and fail if it failed")
	f.DurationVar(&waitTimeout, "wait-timeout", 5*time.Minute, "how long --wait waits")
	out = addObjectPrinter(cmd, "created")
	return cmd
}
