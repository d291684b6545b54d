package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Section is one part of a failure dump.
type Section struct {
	Title string
	Body  string
}

// DumpTarget says what a failed test was looking at.
type DumpTarget struct {
	Namespace string
	Cluster   string // empty: dump the namespace only
	Secure    bool   // the cluster serves clients over TLS
	// OperatorNamespace is where the operator managing the cluster runs.
	OperatorNamespace string
}

// Dump collects what explains a failure: the operator's log lines about the
// cluster, the namespace's events, `kubectl describe` of the cluster's pods, the
// EtcdCluster as stored, and etcd's own view of its members. It never fails; what it
// cannot get, it says.
func (f *Framework) Dump(ctx context.Context, t DumpTarget) []Section {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out []Section
	add := func(title, body string, err error) {
		if err != nil {
			body += fmt.Sprintf("\n(error: %v)", err)
		}
		out = append(out, Section{Title: title, Body: body})
	}
	if t.OperatorNamespace != "" {
		logs := f.DeploymentLogs(ctx, t.OperatorNamespace, OperatorDeployment)
		title := "operator log (" + t.OperatorNamespace + ")"
		if t.Cluster != "" {
			logs = FilterLines(logs, t.Cluster, "====", "level=error", "level=fatal", "panic")
			title += ", lines about " + t.Cluster + " and errors"
		}
		add(title, logs, nil)
	}
	add("node", f.nodeHealth(ctx, t.Namespace), nil)
	events, err := f.Kubectl(ctx, "get", "events", "-n", t.Namespace, "--sort-by=.lastTimestamp",
		"-o", "custom-columns=LAST:.lastTimestamp,TYPE:.type,REASON:.reason,OBJECT:.involvedObject.kind,NAME:.involvedObject.name,COUNT:.count,MESSAGE:.message")
	if t.Cluster != "" {
		events = FilterLines(events, t.Cluster, "LAST")
	}
	add("events in "+t.Namespace, events, err)
	if t.Cluster == "" {
		pods, err := f.Kubectl(ctx, "get", "pods", "-n", t.Namespace, "-o", "wide")
		add("pods in "+t.Namespace, pods, err)
		return out
	}
	desc, err := f.Kubectl(ctx, "describe", "pods", "-n", t.Namespace, "-l", ClusterSelector(t.Cluster))
	add("kubectl describe pods -l "+ClusterSelector(t.Cluster), desc, err)
	add("last log lines of the cluster's pods", f.podLogs(ctx, t), nil)
	cr, err := f.Kubectl(ctx, "get", "etcdclusters.etcd.database.coreos.com", "-n", t.Namespace, t.Cluster, "-o", "yaml")
	add("EtcdCluster "+t.Cluster, cr, err)
	other, err := f.Kubectl(ctx, "get", "services,persistentvolumeclaims", "-n", t.Namespace, "-l", ClusterSelector(t.Cluster), "-o", "wide")
	add("services and PVCs", other, err)
	slices, err := f.Kubectl(ctx, "get", "endpointslices", "-n", t.Namespace, "-l", "kubernetes.io/service-name="+t.Cluster+"-client", "-o", "yaml")
	add("endpoints of the client Service", slices, err)
	// A client's requests can reach an address another pod now holds: who
	// holds each address says where they went.
	everyPod, err := f.Kubectl(ctx, "get", "pods", "-A", "-o", "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,IP:.status.podIP,PHASE:.status.phase,DELETING:.metadata.deletionTimestamp")
	add("every pod's address", everyPod, err)
	add("etcdctl member list / endpoint status", f.etcdView(ctx, t), nil)
	return out
}

// etcdView asks every running member for the membership and its status, each
// against its own endpoint, so that a split or a quorum loss shows as such.
func (f *Framework) etcdView(ctx context.Context, t DumpTarget) string {
	pods, err := f.ClusterPods(ctx, t.Namespace, t.Cluster)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range LivePods(pods) {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		args := []string{"--endpoints=" + localEndpoint(t.Secure)}
		if t.Secure {
			args = append(args, MemberTLSArgs...)
		}
		ml, err := f.EtcdctlExec(ctx, t.Namespace, p.Name, append(args, "member", "list", "-w", "table")...)
		fmt.Fprintf(&b, "---- %s: member list\n%s", p.Name, ml)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		st, err := f.EtcdctlExec(ctx, t.Namespace, p.Name, append(args, "endpoint", "status", "-w", "table")...)
		fmt.Fprintf(&b, "---- %s: endpoint status\n%s", p.Name, st)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	if b.Len() == 0 {
		return "no running member to ask"
	}
	return b.String()
}

// nodeHealth tells whether the node itself misbehaved under the test. A kubelet or
// containerd restart fails every running member pod at once (restartPolicy Never,
// state ContainerStatusUnknown): such a failure is the test bed's, not the operator's.
func (f *Framework) nodeHealth(ctx context.Context, ns string) string {
	var b strings.Builder
	nodes, err := f.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				fmt.Fprintf(&b, "node %s Ready=%s since %s (%s)\n", n.Name, c.Status, c.LastTransitionTime.Format(time.RFC3339), c.Message)
			}
		}
	}
	pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return b.String() + err.Error()
	}
	var lost []string
	for _, p := range pods.Items {
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
				if st.Terminated != nil && st.Terminated.Reason == "ContainerStatusUnknown" {
					lost = append(lost, p.Name+"/"+cs.Name)
				}
			}
		}
	}
	b.WriteString(kubeProxyFreshness(ctx))
	if len(lost) > 0 {
		fmt.Fprintf(&b, "WARNING: containers lost by the node (ContainerStatusUnknown): %s\n"+
			"The container runtime or kubelet restarted under the test; pods with restartPolicy Never die from that. "+
			"Check the start times in /var/lib/etcd-operator-local/logs/{containerd,kubelet}.log before blaming the operator.\n",
			strings.Join(lost, " "))
	} else {
		b.WriteString("no container lost by the node in this namespace\n")
	}
	return b.String()
}

// kubeProxyMetrics is where the local cluster's kube-proxy serves its metrics
// (metricsBindAddress in hack/local-cluster/templates/kube-proxy-config.yaml).
const kubeProxyMetrics = "http://127.0.0.1:10249/metrics"

// kubeProxyFreshness tells how long Service changes have waited for kube-proxy.
// A kube-proxy stuck in its sync loop keeps routing a Service to old pod
// addresses or rejecting it as without endpoints, while the EndpointSlices are
// right: clients then fail against a healthy cluster, and that is the test bed's
// failure, not the operator's.
func kubeProxyFreshness(ctx context.Context) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kubeProxyMetrics, nil)
	if err != nil {
		return fmt.Sprintf("kube-proxy: %v\n", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Sprintf("kube-proxy metrics not readable (%v)\n", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Sprintf("kube-proxy metrics not readable (%v)\n", err)
	}
	return describeKubeProxySync(string(body), time.Now())
}

// describeKubeProxySync reads kube-proxy's last sync and the oldest change it
// has queued since from its metrics text.
func describeKubeProxySync(metrics string, now time.Time) string {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(strings.NewReader(metrics))
	if err != nil {
		return fmt.Sprintf("kube-proxy metrics not readable (%v)\n", err)
	}
	synced, okSynced := gaugeTime(families, "kubeproxy_sync_proxy_rules_last_timestamp_seconds")
	queued, okQueued := gaugeTime(families, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds")
	if !okSynced {
		return "kube-proxy has not synced its rules since it started\n"
	}
	line := fmt.Sprintf("kube-proxy last applied Service changes %s ago", now.Sub(synced).Round(time.Second))
	if okQueued && queued.After(synced) {
		waiting := now.Sub(queued).Round(time.Second)
		line += fmt.Sprintf("; a change has waited %s", waiting)
		if waiting > 30*time.Second {
			line = "WARNING: " + line + ": kube-proxy is stuck, Services route to old addresses or reject (see /var/lib/etcd-operator-local/logs/kube-proxy.log)"
		}
	}
	return line + "\n"
}

// gaugeTime is the value of an unlabelled gauge holding a Unix time (untyped
// when the text leaves out its TYPE line).
func gaugeTime(families map[string]*dto.MetricFamily, name string) (time.Time, bool) {
	mf := families[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return time.Time{}, false
	}
	m := mf.GetMetric()[0]
	v := m.GetGauge().GetValue()
	if m.GetGauge() == nil {
		v = m.GetUntyped().GetValue()
	}
	if v <= 0 {
		return time.Time{}, false
	}
	sec := int64(v)
	return time.Unix(sec, int64((v-float64(sec))*1e9)), true
}

// podLogs is the tail of every container log of the cluster's pods.
func (f *Framework) podLogs(ctx context.Context, t DumpTarget) string {
	pods, err := f.ClusterPods(ctx, t.Namespace, t.Cluster)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods {
		out, err := f.Kubectl(ctx, "logs", "-n", t.Namespace, p.Name, "--all-containers", "--prefix", "--timestamps", "--tail=25")
		fmt.Fprintf(&b, "---- %s\n%s", p.Name, out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

func localEndpoint(secure bool) string {
	if secure {
		return "https://localhost:2379"
	}
	return "http://localhost:2379"
}

// FilterLines keeps the lines containing any of the needles.
func FilterLines(s string, needles ...string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		for _, n := range needles {
			if strings.Contains(l, n) {
				keep = append(keep, l)
				break
			}
		}
	}
	return strings.Join(keep, "\n")
}

// WriteDump writes the sections to <ArtifactsDir>/<test>/<name>.txt and returns the path.
func (f *Framework) WriteDump(test, name string, sections []Section) (string, error) {
	dir := filepath.Join(f.Env.ArtifactsDir, strings.NewReplacer("/", "_", " ", "_").Replace(test))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".txt")
	var b strings.Builder
	for _, s := range sections {
		fmt.Fprintf(&b, "======== %s\n%s\n\n", s.Title, strings.TrimRight(s.Body, "\n"))
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// NodeImages lists the images the node has, from its status: the local cluster has
// no registry, so a missing image is a setup problem the suite reports up front.
func (f *Framework) NodeImages(ctx context.Context) (map[string]bool, error) {
	nodes, err := f.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				have[name] = true
			}
		}
	}
	return have, nil
}
