package kubectlplugin

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// operatorSelector finds the operators' pods: example/deployment.yaml and
// the backup and restore Deployments label their pods name=<binary>.
const operatorSelector = "name in (etcd-operator,etcd-backup-operator,etcd-restore-operator)"

// Report writes a diagnostic bundle of the cluster to w, a tar.gz: the
// EtcdCluster, its member pods, the events about them, each member's etcd
// log (the last tail lines), the operators' logs when their pods are
// found in the cluster's namespace, and the namespace's EtcdBackups and
// EtcdRestores. Secrets are never read: a bundle can be attached to a bug
// report. What cannot be read is listed in errors.txt instead of failing
// the whole report.
func (p *Plugin) Report(ctx context.Context, w io.Writer, namespace, name string, tail int64, at time.Time) error {
	cluster, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	b := &bundle{tw: tw, dir: name + "-report/", at: at}

	b.object("etcdcluster.yaml", cluster, api.SchemeGroupVersion.WithKind("EtcdCluster"))
	pods, err := p.memberPods(ctx, cluster)
	b.fail("pods", err)
	podList := &corev1.PodList{Items: pods}
	b.object("pods.yaml", podList, corev1.SchemeGroupVersion.WithKind("PodList"))

	involved := map[string]bool{cluster.Name: true}
	for _, pod := range pods {
		involved[pod.Name] = true
	}
	if events, err := p.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		b.fail("events", err)
	} else {
		var mine []corev1.Event
		for _, e := range events.Items {
			if involved[e.InvolvedObject.Name] {
				mine = append(mine, e)
			}
		}
		b.object("events.yaml", &corev1.EventList{Items: mine}, corev1.SchemeGroupVersion.WithKind("EventList"))
	}

	logs := LogOptions{Tail: tail}
	for _, pod := range pods {
		b.log(ctx, p, "logs/"+pod.Name+".log", namespace, pod.Name, k8sutil.EtcdContainerName, logs)
	}
	if ops, err := p.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: operatorSelector}); err != nil {
		b.fail("operator pods", err)
	} else {
		for _, pod := range ops.Items {
			for _, c := range pod.Spec.Containers {
				b.log(ctx, p, "operator-logs/"+pod.Name+"_"+c.Name+".log", namespace, pod.Name, c.Name, logs)
			}
		}
		if len(ops.Items) == 0 {
			b.fail("operator logs", fmt.Errorf("no pod labelled %s in %s: an operator in another namespace is not collected", operatorSelector, namespace))
		}
	}

	if list, err := p.Etcd.EtcdV1beta2().EtcdBackups(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		b.fail("etcdbackups", err)
	} else {
		b.object("etcdbackups.yaml", list, api.SchemeGroupVersion.WithKind("EtcdBackupList"))
	}
	if list, err := p.Etcd.EtcdV1beta2().EtcdRestores(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		b.fail("etcdrestores", err)
	} else {
		b.object("etcdrestores.yaml", list, api.SchemeGroupVersion.WithKind("EtcdRestoreList"))
	}
	if len(b.errors) > 0 {
		b.file("errors.txt", []byte(strings.Join(b.errors, "\n")+"\n"))
	}
	if b.err != nil {
		return b.err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// bundle writes the files of a report; the first write error stops it.
type bundle struct {
	tw     *tar.Writer
	dir    string
	at     time.Time
	errors []string
	err    error
}

func (b *bundle) fail(what string, err error) {
	if err != nil {
		b.errors = append(b.errors, fmt.Sprintf("%s: %v", what, err))
	}
}

func (b *bundle) file(name string, data []byte) {
	if b.err != nil {
		return
	}
	hdr := &tar.Header{Name: b.dir + name, Mode: 0o644, Size: int64(len(data)), ModTime: b.at, Typeflag: tar.TypeReg}
	if b.err = b.tw.WriteHeader(hdr); b.err == nil {
		_, b.err = b.tw.Write(data)
	}
}

func (b *bundle) object(name string, obj runtime.Object, gvk schema.GroupVersionKind) {
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	data, err := yaml.Marshal(obj)
	if err != nil {
		b.fail(name, err)
		return
	}
	b.file(name, data)
}

func (b *bundle) log(ctx context.Context, p *Plugin, name, namespace, pod, container string, o LogOptions) {
	opts := o.podLogOptions()
	opts.Container = container
	data, err := p.Kube.CoreV1().Pods(namespace).GetLogs(pod, opts).DoRaw(ctx)
	if err != nil {
		b.fail("logs of "+pod+"/"+container, err)
		return
	}
	b.file(name, data)
}

func (c *cli) reportCommand() *cobra.Command {
	var file string
	var tail int64
	cmd := c.clusterCommand("report", "Write a diagnostic bundle (tar.gz) to attach to a bug report; no secrets",
		`Write a tar.gz of what helps diagnose the cluster: the EtcdCluster, its member
pods and the events about them, each member's etcd log (--tail lines), the
operators' logs when their pods run in the cluster's namespace, and the
namespace's EtcdBackups and EtcdRestores. Secrets are never read. What could
not be read is listed in errors.txt in the bundle.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			if file == "" {
				file = fmt.Sprintf("%s-report-%s.tar.gz", name, time.Now().UTC().Format(backupSuffixLayout))
			}
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if err := p.Report(cmd.Context(), f, namespace, name, tail, time.Now()); err != nil {
				_ = f.Close()
				_ = os.Remove(file)
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "wrote %s\n", file)
			return nil
		})
	cmd.Flags().StringVar(&file, "file", "", "the bundle to write (default: CLUSTER-report-<date>-<time>.tar.gz; never overwritten)")
	cmd.Flags().Int64Var(&tail, "tail", 1000, "last lines of each log")
	return cmd
}
