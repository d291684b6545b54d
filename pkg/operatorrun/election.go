package operatorrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// The original's timings: a standby takes over at most ~15 s after the leader dies.
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

// ErrLostLeadership ends a binary that stopped leading: it exits and its Deployment
// restarts it as a standby, which is simpler and safer than stopping every worker.
var ErrLostLeadership = errors.New("lost leadership")

// LeaderConfig says which lock to hold.
type LeaderConfig struct {
	Kube      kubernetes.Interface
	Namespace string
	// LockName is the lock's name: etcd-operator, etcd-backup-operator or
	// etcd-restore-operator, the original's, whether a Lease or Endpoints.
	LockName string
	Identity string
	Log      *logrus.Entry
	// Recorder, when set, gets the events saying which lock is used or which
	// rule is missing, on the operator's own pod (PodName in Namespace).
	Recorder record.EventRecorder
	PodName  string
	// Unready, when set, is told why the process cannot lead, for /readyz.
	Unready func(why string)
	// Fence, when set, is kept told whether this process holds the lock, for
	// the leader's workers to check before they change anything.
	Fence *Fence
	// Ready, when set, is told once this process may contend for the lock:
	// from then on it can take over, leading or standing by, which is what
	// /readyz says.
	Ready func()
	// Leadership, when set, is told when leadership starts and ends, for the
	// leader gauge and label.
	Leadership *Leadership
}

// Event reasons on the operator's own pod.
const (
	EventLeaderElectionLock      = "LeaderElectionLock"
	EventLeaderElectionForbidden = "LeaderElectionForbidden"
)

// forbiddenRecheck is how often a process that may use no lock asks again:
// a rule added to the role takes effect without a restart.
const forbiddenRecheck = 30 * time.Second

// RunAsLeader blocks until ctx is done or leadership is lost, running lead while this
// process holds the lock. It returns nil after a clean shutdown (the lock is
// released so a standby takes over at once) and ErrLostLeadership otherwise.
func RunAsLeader(ctx context.Context, cfg LeaderConfig, lead func(ctx context.Context)) error {
	if cfg.Leadership != nil {
		cfg.Leadership.unlabelSelf(ctx)
	}
	choice, ok := chooseLock(ctx, cfg, forbiddenRecheck)
	if !ok {
		return nil
	}
	if cfg.Ready != nil {
		cfg.Ready()
	}
	kind := choice.Kind
	lock := &holderLock{Interface: newLock(cfg, choice)}
	// Written by the elector's goroutine, read here after Run returns.
	var leading atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   LeaseDuration,
		RenewDeadline:   RenewDeadline,
		RetryPeriod:     RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.LockName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				leading.Store(true)
				cfg.Log.Infof("became the leader (%s %s/%s)", kind, cfg.Namespace, cfg.LockName)
				if cfg.Leadership != nil {
					cfg.Leadership.started(ctx, lock.previous())
				}
				lead(ctx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					cfg.Log.Infof("the leader is %s; waiting as a standby", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	// The lock is released (on a clean shutdown) or lost: the label goes
	// with it, even though ctx is done.
	if leading.Load() && cfg.Leadership != nil {
		cfg.Leadership.stopped(ctx)
	}
	if ctx.Err() != nil {
		return nil
	}
	if leading.Load() {
		return ErrLostLeadership
	}
	return fmt.Errorf("leader election for %s ended without leading", cfg.LockName)
}

// newLock is the lock RunAsLeader holds for choice: one kind, or both
// together (bothLocks); yielding to the other kind when choice says so
// (yieldingLock); telling cfg.Fence of every write.
func newLock(cfg LeaderConfig, choice LockChoice) resourcelock.Interface {
	rlc := resourcelock.ResourceLockConfig{Identity: cfg.Identity}
	lease := func() *resourcelock.LeaseLock {
		return &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.LockName},
			Client:     cfg.Kube.CoordinationV1(),
			LockConfig: rlc,
		}
	}
	endpoints := func() *EndpointsLock {
		return &EndpointsLock{Namespace: cfg.Namespace, Name: cfg.LockName, Client: cfg.Kube.CoreV1(), LockConfig: rlc}
	}
	var lock resourcelock.Interface
	switch choice.Kind {
	case LockBoth:
		lock = &bothLocks{endpoints: endpoints(), lease: lease()}
	case LockEndpoints:
		lock = endpoints()
	default:
		lock = lease()
	}
	switch choice.YieldTo {
	case LockEndpoints:
		lock = &yieldingLock{Interface: lock, kind: choice.Kind, otherKind: LockEndpoints, other: endpoints(), now: time.Now, log: cfg.Log}
	case LockLease:
		lock = &yieldingLock{Interface: lock, kind: choice.Kind, otherKind: LockLease, other: lease(), now: time.Now, log: cfg.Log}
	}
	if cfg.Fence != nil {
		lock = fencedLock{Interface: lock, fence: cfg.Fence}
	}
	return lock
}

// chooseLock asks ChooseLock until it has an answer and a lock may be used,
// saying so in the log, an event on the operator's pod and, while no lock may
// be used, /readyz, asking again every recheck. It returns false when ctx
// ends first.
func chooseLock(ctx context.Context, cfg LeaderConfig, recheck time.Duration) (LockChoice, bool) {
	var said string
	for {
		choice, err := ChooseLock(ctx, cfg.Kube, cfg.Namespace)
		wait := RetryPeriod
		switch {
		case err != nil:
			cfg.Log.WithError(err).Warn("cannot choose the leader-election lock yet")
		case choice.Kind != "":
			log := cfg.Log.WithField("lock", choice.Kind)
			if choice.YieldTo != "" {
				log = log.WithField("yieldTo", choice.YieldTo)
			}
			log.Infof("leader election uses %s %s/%s: %s", choice.Kind, cfg.Namespace, cfg.LockName, choice.Why)
			cfg.event(ctx, corev1.EventTypeNormal, EventLeaderElectionLock, fmt.Sprintf("leader election uses %s %s/%s: %s", choice.Kind, cfg.Namespace, cfg.LockName, choice.Why))
			if said != "" && cfg.Unready != nil {
				cfg.Unready("")
			}
			return choice, true
		default:
			wait = recheck
			if choice.Why != said {
				said = choice.Why
				cfg.Log.Error(choice.Why)
				cfg.event(ctx, corev1.EventTypeWarning, EventLeaderElectionForbidden, choice.Why)
				if cfg.Unready != nil {
					cfg.Unready(choice.Why)
				}
			}
		}
		select {
		case <-ctx.Done():
			return LockChoice{}, false
		case <-time.After(wait):
		}
	}
}

// event records an event on the operator's own pod.
func (cfg LeaderConfig) event(ctx context.Context, typ, reason, msg string) {
	podEvent(ctx, cfg.Kube, cfg.Recorder, Identity{Namespace: cfg.Namespace, PodName: cfg.PodName}, typ, reason, msg)
}

// SignalContext is parent, also cancelled on SIGTERM or SIGINT, so a pod being
// deleted shuts down cleanly and hands its Lease over.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// NewLogger is the logrus entry a binary logs through.
func NewLogger(binary string) *logrus.Entry {
	l := logrus.New()
	l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	return l.WithField("pkg", binary)
}

// LogLevel is the -log-level flag of the three binaries. The debug level says
// what every reconcile pass waits for, which is what a stuck cluster needs.
type LogLevel struct{ logrus.Level }

// LogLevelUsage is the flag's help text.
const LogLevelUsage = "log level: debug, info, warn or error"

// DefaultLogLevel is info.
func DefaultLogLevel() LogLevel { return LogLevel{logrus.InfoLevel} }

func (l *LogLevel) String() string { return l.Level.String() }

// Set accepts the levels worth running with; panic, fatal and trace are left
// out, since the binaries log nothing at them.
func (l *LogLevel) Set(s string) error {
	lvl, err := logrus.ParseLevel(s)
	if err != nil || lvl < logrus.ErrorLevel || lvl > logrus.DebugLevel {
		return fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
	}
	l.Level = lvl
	return nil
}
