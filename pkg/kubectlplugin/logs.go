package kubectlplugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// LogOptions choose which lines of the etcd containers' logs are shown.
type LogOptions struct {
	// Follow streams new lines until interrupted.
	Follow bool
	// Tail is the number of last lines of each member; negative: all.
	Tail int64
	// Since shows lines newer than this only; 0: all.
	Since time.Duration
	// Previous shows the logs of the container's previous run, the one a
	// crash ended.
	Previous bool
}

func (o LogOptions) podLogOptions() *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{Container: k8sutil.EtcdContainerName, Follow: o.Follow, Previous: o.Previous}
	if o.Tail >= 0 {
		opts.TailLines = &o.Tail
	}
	if o.Since > 0 {
		s := int64(o.Since.Seconds())
		opts.SinceSeconds = &s
	}
	return opts
}

// memberPods lists the pods the cluster owns, by name.
func (p *Plugin) memberPods(ctx context.Context, cluster *api.EtcdCluster) ([]corev1.Pod, error) {
	list, err := p.Kube.CoreV1().Pods(cluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: k8sutil.ClusterSelector(cluster.Name).String()})
	if err != nil {
		return nil, fmt.Errorf("list the pods of %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	var pods []corev1.Pod
	for _, pod := range list.Items {
		if k8sutil.IsOwnedBy(&pod, cluster) {
			pods = append(pods, pod)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// Logs writes the etcd container's log of one member, or of every member
// when member is empty, each line prefixed with the member's pod name. With
// Follow the members' lines are interleaved as they come.
func (p *Plugin) Logs(ctx context.Context, w io.Writer, namespace, name, member string, o LogOptions) error {
	cluster, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	var pods []string
	if member != "" {
		if _, err := p.memberPod(ctx, cluster, member); err != nil {
			return err
		}
		pods = []string{member}
	} else {
		list, err := p.memberPods(ctx, cluster)
		if err != nil {
			return err
		}
		for _, pod := range list {
			pods = append(pods, pod.Name)
		}
		if len(pods) == 0 {
			return fmt.Errorf("%s/%s has no member pods right now", namespace, name)
		}
	}
	out := &lineWriter{w: w}
	if !o.Follow {
		// One member after the other, so that each one's lines stay together.
		var errs []error
		for _, pod := range pods {
			if err := p.copyLog(ctx, out, namespace, pod, o); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() { errs[i] = p.copyLog(ctx, out, namespace, pod, o) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *Plugin) copyLog(ctx context.Context, out *lineWriter, namespace, pod string, o LogOptions) error {
	stream, err := p.Kube.CoreV1().Pods(namespace).GetLogs(pod, o.podLogOptions()).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s/%s: %w", namespace, pod, err)
	}
	defer func() { _ = stream.Close() }()
	r := bufio.NewReader(stream)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			if line[len(line)-1] != '\n' {
				line += "\n"
			}
			if werr := out.write("[" + pod + "] " + line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) || (err != nil && ctx.Err() != nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("logs of %s/%s: %w", namespace, pod, err)
		}
	}
}

// lineWriter writes whole lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) write(line string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := io.WriteString(l.w, line)
	return err
}

func (c *cli) logsCommand() *cobra.Command {
	o := LogOptions{}
	cmd := &cobra.Command{
		Use:   "logs CLUSTER [MEMBER]",
		Short: "Print the etcd logs of one member or of every member, prefixed by member",
		Long: `Print the logs of the etcd container of one member (a pod name from kubectl etcd
status), or of every member of the cluster, each line prefixed with [member].
With -f, follow them as they come, interleaved.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return fmt.Errorf("logs takes the EtcdCluster's name and optionally a member (pod name), got %d argument(s)", len(args))
			}
			return nil
		},
		ValidArgsFunction: c.completeClusterThenMember(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, namespace, err := c.connect(c.kube)
			if err != nil {
				return err
			}
			member := ""
			if len(args) == 2 {
				member = args[1]
			}
			return p.Logs(cmd.Context(), c.streams.Out, namespace, args[0], member, o)
		},
	}
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "stream the logs as they come")
	cmd.Flags().Int64Var(&o.Tail, "tail", -1, "last lines of each member to show; -1: all")
	cmd.Flags().DurationVar(&o.Since, "since", 0, "only lines newer than this (5s, 2m, 3h)")
	cmd.Flags().BoolVarP(&o.Previous, "previous", "p", false, "the logs of the container's previous run")
	return cmd
}
