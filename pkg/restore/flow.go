package restore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// Event reasons on EtcdRestores: Normal at each step, Warning on trouble.
const (
	ReasonValidating      = "Validating"
	ReasonVerifyingBackup = "VerifyingBackup"
	ReasonBackupVerified  = "BackupVerified"
	// ReasonPointChosen: a restore to a point chose its snapshot and checked
	// that the archive holds every change from it to the point.
	ReasonPointChosen = "PointInTimeChosen"
	// ReasonPointShortOfNewest (Warning): a restore to the latest change
	// cannot replay the archive to its end, and stops before it.
	ReasonPointShortOfNewest = "PointInTimeShortOfNewest"
	ReasonDeletingCluster    = "DeletingCluster"
	ReasonClusterCreated     = "ClusterCreated"
	ReasonSeedCreated        = "SeedCreated"
	ReasonHandedOver         = "ClusterHandedOver"
	ReasonCompleted          = "RestoreCompleted"
	ReasonRetrying           = "RestoreRetrying"
	ReasonFailed             = "RestoreFailed"
	// ReasonTokenOnRestore: the role may not create Secrets.
	ReasonTokenOnRestore = "RestoreTokenNotInSecret"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds the hand-over, from the old cluster's deletion to the
	// restored cluster available at full size, and separately the reading of the
	// backup during verification. A restore that runs out of it is Failed with
	// what it was waiting for; the restored cluster object stays, unpaused, for the
	// user to inspect. Twenty minutes leave room for a multi-GiB snapshot fetched
	// and restored on a slow volume and for members joining one at a time.
	DefaultTimeout = 20 * time.Minute
	// DefaultPollInterval is how often a restore in progress looks at the
	// cluster; each look is a few GETs.
	DefaultPollInterval = 2 * time.Second
	// DefaultMaxRetries is how often a failure that may pass (the store or the API
	// unreachable, the secret not created yet) is retried before the old cluster
	// is touched; with the controller's rate limiter that is about 40 seconds. After the
	// hand-over began, failures are retried until the timeout instead: giving up
	// then would leave the user without a cluster.
	DefaultMaxRetries = 12
)

// Config wires a Flow.
type Config struct {
	Kube     kubernetes.Interface
	Etcd     versioned.Interface
	Recorder record.EventRecorder
	Log      *logrus.Entry
	Metrics  *Metrics

	// OperatorNamespace is where the backup server's Service is.
	OperatorNamespace string
	// ClusterWide selects the EtcdRestores this operator runs by the scope
	// annotation, with etcd-operator's rule for EtcdClusters (api.IsManagedBy):
	// a cluster-wide operator runs the annotated ones of every namespace, a
	// namespaced one the others of its namespace, so two never run one restore.
	ClusterWide bool
	// FetchImage runs the seed's fetch step: the operator's own image.
	FetchImage      string
	FetchPullPolicy corev1.PullPolicy

	// Optional; zero values mean the defaults above, ServiceName, StoreOpener
	// with Kube's secrets and the real clock.
	ServiceName  string
	Timeout      time.Duration
	PollInterval time.Duration
	MaxRetries   int
	Open         OpenFunc
	Clock        clock.PassiveClock
	// Tokens receives the token of every restore the flow runs, for the
	// backup server (BackupHandler.Tokens), which checks requests against it;
	// NewFlow makes one when it is nil.
	Tokens *Tokens
}

// Flow runs EtcdRestores. It keeps no state of its own: everything it needs
// after a crash is in the EtcdRestore (phase and plan) and in the objects it
// created, so any replica can pick a restore up where another left it. (The
// tokens it hands the backup server, Config.Tokens, are a copy of the
// restores' Secrets, read again after a restart by LoadTokens.)
type Flow struct {
	cfg Config
	// restores and clusters write the statuses of EtcdRestores and, for the
	// hand-over, of EtcdClusters.
	restores *statusutil.RestoreWriter
	clusters *statusutil.ClusterWriter
}

// NewFlow fills in the defaults of cfg.
func NewFlow(cfg Config) *Flow {
	if cfg.ServiceName == "" {
		cfg.ServiceName = ServiceName
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.Open == nil {
		cfg.Open = StoreOpener(cfg.Kube.CoreV1(), storage.CloudIdentity{})
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Tokens == nil {
		cfg.Tokens = NewTokens()
	}
	cfg.Log = cfg.Log.WithField("pkg", "restore")
	return &Flow{
		cfg:      cfg,
		restores: statusutil.ForRestores(cfg.Etcd, cfg.Recorder, cfg.Log),
		clusters: statusutil.ForClusters(cfg.Etcd, cfg.Recorder, cfg.Log),
	}
}

// Timeout is the configured restore timeout.
func (f *Flow) Timeout() time.Duration { return f.cfg.Timeout }

// errGone: the EtcdRestore was deleted, or replaced by another of the same name.
var errGone = errors.New("the EtcdRestore is gone")

// Finished tells whether a restore has ended; an ended restore is never run again.
func Finished(er *api.EtcdRestore) bool {
	p := StatusOf(er).Phase
	return p == api.RestorePhaseCompleted || p == api.RestorePhaseFailed
}

// Sync moves the restore namespace/name as far as it can now. It returns how soon
// to look again (0: only on the next change), or an error to retry with backoff;
// attempt is the number of retries of that error so far. The EtcdRestore is read
// from the API server, not from a cache: acting on a stale phase could mean
// verifying a backup against a cluster this very restore already deleted.
func (f *Flow) Sync(ctx context.Context, namespace, name string, attempt int) (time.Duration, error) {
	er, err := f.cfg.Etcd.EtcdV1beta2().EtcdRestores(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		f.cfg.Tokens.forget(namespace, name, "")
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get EtcdRestore %s/%s: %w", namespace, name, err)
	}
	if !api.IsManagedBy(er, f.cfg.ClusterWide) {
		f.cfg.Tokens.forget(namespace, name, "")
		return 0, nil // the other kind of restore operator runs it
	}
	er = withKeptStatus(er)
	var requeue time.Duration
	switch {
	case Finished(er):
		// The finalizer is still there if the operator stopped between writing
		// the result and removing it.
		err = f.release(ctx, er)
	case er.Status.Phase == api.RestorePhaseRestoring:
		requeue, err = f.restore(ctx, er)
	default:
		requeue, err = f.beforeHandOver(ctx, er, attempt)
	}
	// The backup server serves a restore in progress only: once it ended, its
	// token opens nothing.
	if errors.Is(err, errGone) {
		f.cfg.Tokens.forget(namespace, name, er.UID)
		return 0, nil
	}
	if Finished(er) {
		f.cfg.Tokens.forget(namespace, name, er.UID)
	}
	return requeue, err
}

// LoadTokens tells the backup server the tokens of the restores in progress
// among restores (the informer's cache, read at start, before the leader labels its pod
// for the Service): see Tokens. A token that cannot be read now is read again by the
// restore's next sync.
func (f *Flow) LoadTokens(ctx context.Context, restores []*api.EtcdRestore) {
	for _, er := range restores {
		if StatusOf(er).Phase != api.RestorePhaseRestoring || !api.IsManagedBy(er, f.cfg.ClusterWide) {
			continue
		}
		token, err := tokenOf(ctx, f.cfg.Kube.CoreV1(), er)
		if err != nil {
			f.logFor(er).Warnf("the backup server does not know the restore's token yet: %v", err)
			continue
		}
		f.cfg.Tokens.remember(er, token)
	}
}

// event records an event on the EtcdRestore; the kind is set on a copy so the
// recorder can build the reference whatever scheme it has.
func (f *Flow) event(er *api.EtcdRestore, eventType, reason, msg string) {
	if f.cfg.Recorder == nil {
		return
	}
	obj := er.DeepCopy()
	obj.APIVersion = api.SchemeGroupVersion.String()
	obj.Kind = api.EtcdRestoreResourceKind
	f.cfg.Recorder.Event(obj, eventType, reason, msg)
}

func (f *Flow) now() *metav1.Time {
	t := metav1.NewTime(f.cfg.Clock.Now().Truncate(time.Second))
	return &t
}

func (f *Flow) secondsSince(t *metav1.Time) float64 {
	if t == nil {
		return -1
	}
	return f.cfg.Clock.Since(t.Time).Seconds()
}

func (f *Flow) logFor(er *api.EtcdRestore) *logrus.Entry {
	return f.cfg.Log.WithFields(logrus.Fields{"restore-name": er.Name, "restore-namespace": er.Namespace})
}
