package kubectlplugin

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// Executor runs a command in a container of a pod, as `kubectl exec` does.
type Executor interface {
	Exec(ctx context.Context, namespace, pod, container string, command []string, streams genericiooptions.IOStreams) error
}

// APIServerExecutor runs commands through the API server's pods/exec with
// the user's credentials: websockets where the API server offers them
// (Kubernetes 1.30 and later), SPDY otherwise, as kubectl exec does.
type APIServerExecutor struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// Exec implements Executor. stdin is attached when streams.In is set.
func (e APIServerExecutor) Exec(ctx context.Context, namespace, pod, container string, command []string, streams genericiooptions.IOStreams) error {
	req := e.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   command,
			Stdin:     streams.In != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(e.Config, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	if ws, err := remotecommand.NewWebSocketExecutor(e.Config, http.MethodGet, req.URL().String()); err == nil {
		if fb, err := remotecommand.NewFallbackExecutor(ws, exec, httpstream.IsUpgradeFailure); err == nil {
			exec = fb
		}
	}
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: streams.In, Stdout: streams.Out, Stderr: streams.ErrOut}); err != nil {
		return fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	return nil
}
