package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// CheckerBinary is where the operator image keeps the linearizability checker.
const CheckerBinary = "/usr/local/bin/etcd-checker"

// checkerResultPrefix starts the checker's result line (cmd/etcd-checker).
const checkerResultPrefix = "RESULT "

// CheckerPod is a run of etcd-checker as a pod beside a cluster, against its client
// service: the way any client in the cluster reaches etcd.
type CheckerPod struct {
	Namespace, Cluster, Scenario string
	// Duration of the workload.
	Duration time.Duration
	// Settle bounds the final read-back (default 4 min).
	Settle time.Duration
	// Rate is each client's operations per second, and Clients how many run
	// at once (0: the checker's defaults). Fewer operations make a shorter
	// history to judge, for scenarios that run in make test.
	Rate    float64
	Clients int
	// CheckTimeout bounds porcupine's search (0: the checker's default, 5 min).
	// A history that cannot be linearizable (a restore to an older revision)
	// with thousands of writes of unknown outcome sends the search through all
	// their orders: 5 min and 18 GB in one such run.
	CheckTimeout time.Duration
	// TLSSecret, for a cluster with client TLS, is the client secret
	// (spec.TLS.static.operatorSecret's layout) mounted for the checker: it then
	// talks https and presents that certificate.
	TLSSecret string
	// ArtifactDir receives <Scenario>.html, porcupine's visualisation, when the
	// history is not linearizable (default: where the chaos results go).
	ArtifactDir string
}

// checkerVisualization is where the checker pod writes the visualisation, and
// the name of the artifact that carries it in the pod's log.
const checkerVisualization = "/tmp/history.html"

// Checker is a started checker pod.
type Checker struct {
	f           *Framework
	ns          string
	Name        string
	artifactDir string
	scenario    string
}

// ChaosResultsDir is where the fault scenarios keep their result lines (and
// visualisations): $E2E_CHAOS_RESULTS, which hack/chaos.sh sets, else
// _output/e2e/chaos of the repository.
func (f *Framework) ChaosResultsDir() string {
	if dir := os.Getenv("E2E_CHAOS_RESULTS"); dir != "" {
		return dir
	}
	return filepath.Join(f.Env.RepoRoot, "_output", "e2e", "chaos")
}

func (f *Framework) operatorImage() string {
	if f.Env.OperatorImage != "" {
		return f.Env.OperatorImage
	}
	return "openetcd/etcd-operator:v0.1.0"
}

// StartChecker creates the checker pod and returns once its workload runs.
func (f *Framework) StartChecker(ctx context.Context, p CheckerPod) (*Checker, error) {
	if p.Settle == 0 {
		p.Settle = 4 * time.Minute
	}
	name := UniqueName("checker")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "e2e-etcd-checker"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  new(false),
			TerminationGracePeriodSeconds: new(int64(0)),
			Containers: []corev1.Container{{
				Name:            "checker",
				Image:           f.operatorImage(),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         checkerCommand(name, p),
			}},
		},
	}
	if p.TLSSecret != "" {
		pod.Spec.Volumes = []corev1.Volume{{
			Name:         "client-tls",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: p.TLSSecret}},
		}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "client-tls", MountPath: ClientTLSMountDir, ReadOnly: true}}
	}
	pods := f.Kube.CoreV1().Pods(p.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create checker pod: %w", err)
	}
	if p.ArtifactDir == "" {
		p.ArtifactDir = f.ChaosResultsDir()
	}
	c := &Checker{f: f, ns: p.Namespace, Name: name, artifactDir: p.ArtifactDir, scenario: p.Scenario}
	err := WaitFor(ctx, 2*time.Minute, Poll, "checker pod "+name+" to start its workload", func(ctx context.Context) (bool, string, error) {
		got, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded {
			log, _ := c.Log(ctx)
			return false, "", fmt.Errorf("checker pod %s ended at once (%s): %s", name, got.Status.Phase, log)
		}
		if got.Status.Phase != corev1.PodRunning {
			return false, string(got.Status.Phase), nil
		}
		log, err := c.Log(ctx)
		return err == nil && strings.Contains(log, "workload started"), "running, no workload yet", nil
	})
	if err != nil {
		c.Delete()
		return nil, err
	}
	return c, nil
}

// checkerCommand is the command line of the checker pod name for p. Each pod
// writes under a prefix of its own: its model starts from keys never written, so
// a second run on the same cluster must not meet the first one's values.
func checkerCommand(name string, p CheckerPod) []string {
	cmd := []string{CheckerBinary,
		"-endpoints=" + ClientURL(p.Cluster, p.TLSSecret != ""),
		"-prefix=" + checkerPrefix(name),
		"-scenario=" + p.Scenario,
		"-duration=" + p.Duration.String(),
		"-settle=" + p.Settle.String(),
		"-visualization=" + checkerVisualization,
	}
	if p.Rate > 0 {
		cmd = append(cmd, fmt.Sprintf("-rate=%g", p.Rate))
	}
	if p.Clients > 0 {
		cmd = append(cmd, fmt.Sprintf("-clients=%d", p.Clients))
	}
	if p.CheckTimeout > 0 {
		cmd = append(cmd, "-check-timeout="+p.CheckTimeout.String())
	}
	if p.TLSSecret != "" {
		// The same files etcdctl is given (ClientTLSArgs), under the checker's
		// flag names.
		cmd = append(cmd,
			"-cacert="+ClientTLSMountDir+"/"+etcdutil.SecretClientCA,
			"-cert="+ClientTLSMountDir+"/"+etcdutil.SecretClientCert,
			"-key="+ClientTLSMountDir+"/"+etcdutil.SecretClientKey)
	}
	return cmd
}

// saveVisualization copies the visualisation the checker printed into its log
// to <artifactDir>/<scenario>.html and points r at that copy.
func (c *Checker) saveVisualization(r *checker.Result, log string) error {
	html, err := checker.ReadArtifact(log, filepath.Base(r.Visualization))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.artifactDir, 0o755); err != nil {
		return err
	}
	name := c.scenario
	if name == "" {
		name = c.Name
	}
	path := filepath.Join(c.artifactDir, name+".html")
	if err := os.WriteFile(path, html, 0o644); err != nil {
		return err
	}
	r.Visualization = path
	return nil
}

// Log is the pod's output so far.
func (c *Checker) Log(ctx context.Context) (string, error) {
	raw, err := c.f.Kube.CoreV1().Pods(c.ns).GetLogs(c.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	return string(raw), err
}

// Wait waits for the checker to end and returns its result and its log.
func (c *Checker) Wait(ctx context.Context, timeout time.Duration) (checker.Result, string, error) {
	var r checker.Result
	pods := c.f.Kube.CoreV1().Pods(c.ns)
	err := WaitFor(ctx, timeout, Poll, "checker pod "+c.Name+" to finish", func(ctx context.Context) (bool, string, error) {
		got, err := pods.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed, string(got.Status.Phase), nil
	})
	log, lerr := c.Log(ctx)
	if err != nil {
		return r, log, err
	}
	if lerr != nil {
		return r, log, fmt.Errorf("log of checker pod %s: %w", c.Name, lerr)
	}
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, checkerResultPrefix); ok {
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return r, log, fmt.Errorf("parse the checker's result %q: %w", rest, err)
			}
			if r.Visualization != "" {
				if err := c.saveVisualization(&r, log); err != nil {
					return r, log, fmt.Errorf("keep the visualization of checker pod %s: %w", c.Name, err)
				}
			}
			return r, log, nil
		}
	}
	return r, log, fmt.Errorf("checker pod %s printed no result", c.Name)
}

// Delete removes the pod.
func (c *Checker) Delete() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.f.Kube.CoreV1().Pods(c.ns).Delete(ctx, c.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
}

// LocalChecker is a run of the checker inside the test's own process, a client
// off the node: for faults that kill every container on the node, where a checker
// pod would die with the cluster it watches (a reboot ends every pod's history).
// It reaches the cluster through the client Service's cluster IP, as the node's
// kube-proxy rules route it.
type LocalChecker struct {
	done chan struct{}
	log  etcdtest.Output
	res  checker.Result
	err  error
	stop context.CancelFunc
}

// StartLocalChecker starts the workload against the cluster's client Service from
// this process; p.Namespace and p.Cluster name the cluster.
func (f *Framework) StartLocalChecker(ctx context.Context, p CheckerPod) (*LocalChecker, error) {
	if p.Settle == 0 {
		p.Settle = 4 * time.Minute
	}
	endpoint, err := f.ClientServiceURL(ctx, p.Namespace, p.Cluster, false)
	if err != nil {
		return nil, err
	}
	c := &LocalChecker{done: make(chan struct{})}
	logger := logrus.New()
	logger.SetOutput(&c.log)
	log := logger.WithField("scenario", p.Scenario)
	// Not the test's context alone: a run cut short has no verdict, so it stops
	// only when the test ends or Delete is called.
	runCtx, stop := context.WithCancel(ctx)
	c.stop = stop
	cfg := checker.Config{
		Endpoints: []string{endpoint},
		Duration:  p.Duration,
		Settle:    p.Settle,
		Rate:      p.Rate,
		Clients:   p.Clients,
		Seed:      uint64(time.Now().UnixNano()),
		Log:       log,
	}
	log.WithField("endpoints", cfg.Endpoints).Info("workload started")
	go func() {
		defer close(c.done)
		h, err := checker.Run(runCtx, cfg)
		if err != nil {
			c.err = err
			return
		}
		c.res, c.err = checker.Check(h, checker.CheckOptions{Timeout: 5 * time.Minute})
		c.res.Scenario = p.Scenario
		log.WithField("result", c.res.String()).Info("checked")
	}()
	return c, nil
}

// ClientServiceURL is the client URL of the cluster's client Service at its
// cluster IP: how a client on the host, off the cluster's DNS, reaches the
// cluster through the node's kube-proxy rules.
func (f *Framework) ClientServiceURL(ctx context.Context, ns, cluster string, secure bool) (string, error) {
	svc, err := f.Kube.CoreV1().Services(ns).Get(ctx, cluster+"-client", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the client service of %s: %w", cluster, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("the client service of %s has no cluster IP", cluster)
	}
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s:2379", scheme, svc.Spec.ClusterIP), nil
}

// Wait waits for the run to end and returns its result and its log.
func (c *LocalChecker) Wait(ctx context.Context, timeout time.Duration) (checker.Result, string, error) {
	select {
	case <-c.done:
		return c.res, c.log.String(), c.err
	case <-ctx.Done():
		return c.res, c.log.String(), ctx.Err()
	case <-time.After(timeout):
		return c.res, c.log.String(), fmt.Errorf("the local checker did not finish within %s", timeout)
	}
}

// Delete stops a run still going; it does not wait for the run's last steps.
func (c *LocalChecker) Delete() { c.stop() }

// checkerPrefix is where the checker pod name writes.
func checkerPrefix(name string) string { return "/etcd-checker/" + name + "/" }

// Appends is where the checker writes its unique keys: never overwritten, so
// each one acknowledged must remain.
func (c *Checker) Appends() string { return checkerPrefix(c.Name) + "a/" }

// checkerAddress is how the checker's log names the address a connection
// reached (pkg/checker): " at <ip>:<port>" after an answer or before an error.
var checkerAddress = regexp.MustCompile(` at ([0-9a-fA-F.:\[\]]+):(\d+)\b`)

// AddressesReached are the IP addresses the checker's log says its
// connections reached, sorted, each once.
func AddressesReached(checkerLog string) []string {
	seen := map[string]bool{}
	for _, m := range checkerAddress.FindAllStringSubmatch(checkerLog, -1) {
		seen[strings.Trim(m[1], "[]")] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// WhatHolds says what holds each of addrs now, in any namespace: a Service
// (its cluster IP: a client of a Service sees only that address, whichever
// pod the proxy sent its connection to) or a pod (a client given members'
// addresses). A checker connection that met something other than its
// cluster's members is told by the address, and what holds it names it.
func (f *Framework) WhatHolds(ctx context.Context, addrs []string) string {
	if len(addrs) == 0 {
		return ""
	}
	holders := map[string][]string{}
	pods, err := f.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("what holds the addresses reached: list pods: %v\n", err)
	}
	for _, p := range pods.Items {
		for _, ip := range p.Status.PodIPs {
			holders[ip.IP] = append(holders[ip.IP], fmt.Sprintf("pod %s/%s (%s)", p.Namespace, p.Name, p.Status.Phase))
		}
	}
	svcs, err := f.Kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("what holds the addresses reached: list services: %v\n", err)
	}
	for _, svc := range svcs.Items {
		for _, ip := range svc.Spec.ClusterIPs {
			holders[ip] = append(holders[ip], fmt.Sprintf("service %s/%s", svc.Namespace, svc.Name))
		}
	}
	var b strings.Builder
	b.WriteString("what holds the addresses the connections reached, at the end of the run:\n")
	for _, addr := range addrs {
		held := strings.Join(holders[addr], ", ")
		if held == "" {
			held = "nothing now"
		}
		fmt.Fprintf(&b, "  %s: %s\n", addr, held)
	}
	return b.String()
}
