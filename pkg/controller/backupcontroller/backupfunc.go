package backupcontroller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// Backuper is the real BackupFunc: it snapshots the cluster an EtcdBackup names into
// the store it names, with secrets read from the EtcdBackup's namespace.
type Backuper struct {
	Secrets corev1client.SecretsGetter
	// Clusters reads the EtcdCluster that spec.clusterName names.
	Clusters versioned.Interface
	// ClusterWide refuses endpoints outside the EtcdBackup's namespace (see
	// checkOwnNamespace): a cluster-wide operator serves every namespace.
	ClusterWide bool
	// DialTimeout bounds connecting to one etcd endpoint; 0 means etcdutil's default.
	DialTimeout time.Duration
	// Now names periodic backups; nil means time.Now.
	Now func() time.Time
	// VerifyDir holds the temporary copy of a backup being verified; "" is the
	// system's temporary directory.
	VerifyDir string
	// CloudIdentity says to which namespaces the operator lends its own cloud
	// identity; the zero value lends it to none.
	CloudIdentity storage.CloudIdentity
	// Log is the archives' log; nil means logrus' standard logger.
	Log *logrus.Entry
}

// Backup takes one backup, bounded by spec.backupPolicy.timeoutInSecond, and with
// verify reads it back within a second such bound: reading a snapshot back takes
// about as long as storing it.
func (b *Backuper) Backup(ctx context.Context, eb *api.EtcdBackup, verify bool) (*backup.Result, error) {
	spec := &eb.Spec
	timeout := time.Duration(spec.BackupPolicy.BackupTimeout()) * time.Second
	limit := "spec.backupPolicy.timeoutInSecond"
	if verify {
		timeout *= 2
		limit = "twice spec.backupPolicy.timeoutInSecond, as the backup is verified"
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	o, err := b.open(tctx, eb)
	if err != nil {
		return nil, b.explainTimeout(ctx, tctx, timeout, limit, err)
	}
	job := backup.Job{
		Source:   backup.Source{Endpoints: o.target.endpoints, TLS: o.tls, DialTimeout: b.DialTimeout},
		Codec:    o.codec,
		Store:    o.store,
		Bucket:   o.loc.Bucket,
		Key:      o.loc.Key,
		Periodic: spec.IsPeriodic(),
		Now:      b.Now,
	}
	if pol := spec.BackupPolicy; pol != nil {
		job.MaxBackups = pol.MaxBackups
		if t := pol.Retention; t != nil {
			job.Tiers = &backup.Tiers{Hourly: t.Hourly, Daily: t.Daily, Weekly: t.Weekly, Monthly: t.Monthly}
		}
		// The controller validated the spec; an error here is a bug, and
		// pruning in the wrong zone must not be its price.
		if job.Location, err = api.LoadTimeZone(pol.TimeZone); err != nil {
			return nil, failure.Permanent(fmt.Errorf("spec.backupPolicy.timeZone: %w", err))
		}
	}
	job.Verify, job.VerifyDir = verify, b.VerifyDir
	res, err := backup.Run(tctx, job)
	if err != nil {
		return nil, b.explainTimeout(ctx, tctx, timeout, limit, err)
	}
	return res, nil
}

// opened is what a backup and an archive of an EtcdBackup both need.
type opened struct {
	target target
	store  backup.Store
	loc    storage.Location
	codec  backup.Codec
	tls    *tls.Config
}

// open resolves the cluster an EtcdBackup names and opens its store, codec
// and client TLS, with secrets from its namespace.
func (b *Backuper) open(ctx context.Context, eb *api.EtcdBackup) (*opened, error) {
	spec := &eb.Spec
	if b.ClusterWide && spec.ClusterName == "" {
		if err := checkOwnNamespace(eb.Namespace, spec.EtcdEndpoints); err != nil {
			return nil, err
		}
	}
	var o opened
	var err error
	if o.target, err = resolveTarget(ctx, b.Clusters, eb); err != nil {
		return nil, err
	}
	if o.store, o.loc, err = storage.ForBackup(ctx, b.Secrets, b.CloudIdentity, eb.Namespace, spec); err != nil {
		return nil, err
	}
	if o.codec, err = storage.CodecFor(ctx, b.Secrets, eb.Namespace, spec); err != nil {
		return nil, err
	}
	if o.tls, err = b.clientTLS(ctx, eb.Namespace, o.target.tlsSecret, o.target.tlsField); err != nil {
		return nil, err
	}
	return &o, nil
}

// explainTimeout says which setting ran out when the backup's own deadline, not the
// caller's, ended it: "context deadline exceeded" alone sends users hunting.
func (b *Backuper) explainTimeout(parent, tctx context.Context, timeout time.Duration, limit string, err error) error {
	if parent.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the backup did not finish within %v (%s): %w", timeout, limit, err)
	}
	return err
}

// clientTLS builds the etcd client TLS configuration from the secret named in
// field (spec.clientTLSSecret, or the operator secret of spec.clusterName), if any.
func (b *Backuper) clientTLS(ctx context.Context, namespace, secretName, field string) (*tls.Config, error) {
	if secretName == "" {
		return nil, nil
	}
	s, err := storage.GetSecret(ctx, b.Secrets, namespace, secretName, field)
	if err != nil {
		return nil, err
	}
	cfg, err := etcdutil.TLSConfigFromSecretData(s.Data)
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("secret %s/%s (%s): %w", namespace, secretName, field, err))
	}
	return cfg, nil
}

// Archive is the real ArchiveFunc: it opens the cluster and the store an
// EtcdBackup names, as Backup does, and an archive.Archiver that stores
// chunks with the snapshots' codec under the backup's path followed by
// api.ArchivePathSuffix.
func (b *Backuper) Archive(ctx context.Context, eb *api.EtcdBackup, after int64) (Archive, error) {
	spec := &eb.Spec
	tctx, cancel := context.WithTimeout(ctx, time.Duration(spec.BackupPolicy.BackupTimeout())*time.Second)
	defer cancel()
	o, err := b.open(tctx, eb)
	if err != nil {
		return nil, err
	}
	dial := b.DialTimeout
	if dial <= 0 {
		dial = etcdutil.DefaultDialTimeout
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints: o.target.endpoints, TLS: o.tls, DialTimeout: dial, Logger: zap.NewNop(),
		// The archiver watches again at once after a lost member; the
		// client's own reconnects must not wait longer (pkg/checker's
		// reconnectParams say why gRPC's default does).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client %v: %w", o.target.endpoints, err)
	}
	prefix := o.loc.Key + api.ArchivePathSuffix
	a, err := archive.New(archive.Config{Client: client, Store: o.store, Prefix: prefix, Codec: o.codec, After: after,
		Interval: spec.BackupPolicy.Archive.Interval(),
		Log:      b.log().WithFields(logrus.Fields{"backup-name": eb.Name, "backup-namespace": eb.Namespace})})
	if err != nil {
		_ = client.Close()
		return nil, failure.Permanent(err)
	}
	return &openArchive{Archiver: a, prefix: o.loc.Bucket + "/" + prefix, client: client}, nil
}

func (b *Backuper) log() *logrus.Entry {
	if b.Log != nil {
		return b.Log
	}
	return logrus.NewEntry(logrus.StandardLogger())
}

// openArchive is an Archiver with the client it closes.
type openArchive struct {
	*archive.Archiver
	prefix string
	client *clientv3.Client
}

func (o *openArchive) Prefix() string { return o.prefix }
func (o *openArchive) Close()         { _ = o.client.Close() }
