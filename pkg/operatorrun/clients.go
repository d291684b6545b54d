package operatorrun

import (
	"fmt"
	"net/http"
	"strings"

	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	etcdscheme "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/scheme"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
)

// Clients are the API clients an operator uses.
type Clients struct {
	Kube   kubernetes.Interface
	Etcd   versioned.Interface
	APIExt apiextclient.Interface
	// Dynamic reads and writes the objects of other projects' APIs the
	// operator does not link (cert-manager's Certificates).
	Dynamic dynamic.Interface
	// Requests counts every request the clients make; register it with
	// RegisterMetrics.
	Requests *prometheus.CounterVec
}

// RegisterMetrics adds the clients' request counter to reg.
func (c *Clients) RegisterMetrics(reg prometheus.Registerer) {
	c.Requests = promutil.Register(reg, c.Requests)
}

// NewClients builds clients from a kubeconfig file, or from the pod's service account
// when kubeconfig is empty. The apiserver's warnings go to log (see
// apiserverWarnings).
func NewClients(kubeconfig, userAgent string, log *logrus.Entry) (*Clients, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config (use -kubeconfig outside a cluster): %w", err)
	}
	cfg.UserAgent = userAgent + "/" + Version
	// Bursts happen when many clusters start at once after a restart; the defaults (5/10)
	// would make them queue behind each other for seconds.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.WarningHandler = &apiserverWarnings{log: log}
	out := &Clients{Requests: newRequestCounter(userAgent)}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return requestCounter{next: rt, count: out.Requests}
	})
	if out.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if out.Etcd, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if out.APIExt, err = apiextclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if out.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return out, nil
}

// EventScheme knows the built-in kinds and ours: a recorder looks up the kind of the
// object an event is about, and objects from informers carry no TypeMeta.
func EventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(etcdscheme.AddToScheme(s))
	return s
}

// NewEventRecorder returns a recorder whose events name the operator as their source,
// and a function that stops the broadcaster.
func NewEventRecorder(kube kubernetes.Interface, component, host string, log *logrus.Entry) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithCorrelatorOptions(eventCorrelation()))
	b.StartEventWatcher(func(e *corev1.Event) {
		log.WithField("object", e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name).Debugf("event %s: %s", e.Reason, e.Message)
	})
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(EventScheme(), corev1.EventSource{Component: component, Host: host}), b.Shutdown
}

// A cluster's events tell the steps of its changes, one per pass: a CA
// rotation or a rolling upgrade of five members tells dozens within minutes,
// and a long-lived cluster hundreds over its life. client-go's defaults
// (25 events about one object, then one every five minutes; a reason's
// messages merged into one event after ten) would hide the last steps of such
// a change from kubectl describe, where users follow it. So the bound is kept
// per reason, so that one kind of news never silences another, and is wide
// enough for the longest change; a reason told without end is still held to
// it.
const (
	// EventBurstPerReason events of one reason about one object reach the
	// API at once; past them, one every EventRefillSecondsPerReason.
	EventBurstPerReason         = 60
	EventRefillSecondsPerReason = 30
	// EventsMergedAfter different messages of one reason within ten minutes,
	// the next are merged into one event that shows the latest.
	EventsMergedAfter = 60
)

func eventCorrelation() record.CorrelatorOptions {
	return record.CorrelatorOptions{
		BurstSize:   EventBurstPerReason,
		QPS:         1. / EventRefillSecondsPerReason,
		MaxEvents:   EventsMergedAfter,
		SpamKeyFunc: eventSpamKeyByReason,
	}
}

// eventSpamKeyByReason is client-go's key (source, object, type) with the
// reason added.
func eventSpamKeyByReason(e *corev1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type, e.Reason,
	}, "/")
}
