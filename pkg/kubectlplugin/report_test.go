package kubectlplugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// untar reads a report into file name -> content.
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(b)
	}
}

func TestReport(t *testing.T) {
	const secretValue = "TOPSECRET-never-in-a-report"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "op-tls", Namespace: ns}, Data: map[string][]byte{"etcd-client.key": []byte(secretValue)}}
	operator := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator-abc", Namespace: ns, Labels: map[string]string{"name": "etcd-operator"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd-operator"}}}}
	event := func(name, about string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, InvolvedObject: corev1.ObjectReference{Name: about}, Reason: "R-" + name}
	}
	backup := &api.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns}}
	restore := &api.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "restore-1", Namespace: ns}}
	f := newKubeFixture(t, func(c *api.EtcdCluster) {
		c.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{OperatorSecret: "op-tls"}}
	}, secret, operator, backup, restore)
	for _, e := range []*corev1.Event{event("e1", "example"), event("e2", "example-m1"), event("e3", "other-m0")} {
		if _, err := f.kube.CoreV1().Events(ns).Create(t.Context(), e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	file := filepath.Join(t.TempDir(), "r.tar.gz")
	out, _, err := cliRun(t, f.plugin, "report", "example", "-n", ns, "--file", file, "--tail", "50")
	if err != nil || out != "wrote "+file+"\n" {
		t.Fatalf("report printed %q, %v", out, err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, data)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"etcdbackups.yaml", "etcdcluster.yaml", "etcdrestores.yaml", "events.yaml",
		"logs/example-m0.log", "logs/example-m1.log", "logs/example-m2.log",
		"operator-logs/etcd-operator-abc_etcd-operator.log", "pods.yaml"}
	for i := range want {
		want[i] = "example-report/" + want[i]
	}
	if !slices.Equal(names, want) {
		t.Fatalf("bundle files\n%q\nwant\n%q", names, want)
	}
	for n, content := range files {
		if strings.Contains(content, secretValue) {
			t.Errorf("%s holds the secret's value", n)
		}
	}
	for _, a := range f.kube.Actions() {
		if a.GetResource().Resource == "secrets" {
			t.Errorf("the report read secrets: %v", a)
		}
	}
	ev := files["example-report/events.yaml"]
	if !strings.Contains(ev, "R-e1") || !strings.Contains(ev, "R-e2") || strings.Contains(ev, "R-e3") {
		t.Errorf("events.yaml should hold the cluster's and its members' events only:\n%s", ev)
	}
	pods := files["example-report/pods.yaml"]
	if !strings.Contains(pods, "kind: PodList") || strings.Contains(pods, "example-stranger") || strings.Contains(pods, "other-m0") {
		t.Errorf("pods.yaml should hold the cluster's member pods only:\n%s", pods)
	}
	if !strings.Contains(files["example-report/etcdcluster.yaml"], "kind: EtcdCluster") ||
		!strings.Contains(files["example-report/etcdbackups.yaml"], "name: nightly") ||
		!strings.Contains(files["example-report/etcdrestores.yaml"], "name: restore-1") ||
		files["example-report/logs/example-m1.log"] != "fake logs" {
		t.Errorf("bundle contents: %q", files)
	}

	// A report is never written over an existing file.
	if _, _, err := cliRun(t, f.plugin, "report", "example", "-n", ns, "--file", file); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second report to the same file = %v", err)
	}
}

func TestReportSaysWhatItCouldNotCollect(t *testing.T) {
	f := newKubeFixture(t, nil)
	var buf bytes.Buffer
	if err := f.plugin.Report(t.Context(), &buf, ns, "example", 10, time.Now()); err != nil {
		t.Fatal(err)
	}
	errs := untar(t, buf.Bytes())["example-report/errors.txt"]
	if !strings.Contains(errs, "operator logs: no pod labelled") {
		t.Fatalf("errors.txt = %q", errs)
	}
}
