package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// APIServerForwarder forwards pod ports through the API server, the way
// `kubectl port-forward` does: with the user's credentials, needing create
// on pods/portforward. It speaks websockets where the API server offers
// them (Kubernetes 1.30 and later) and falls back to SPDY.
type APIServerForwarder struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// Forward implements Forwarder on a free local port of 127.0.0.1.
func (f APIServerForwarder) Forward(ctx context.Context, namespace, pod string, port int) (string, func(), error) {
	req := f.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(f.Config)
	if err != nil {
		return "", nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	if ws, err := portforward.NewSPDYOverWebsocketDialer(req.URL(), f.Config); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, httpstream.IsUpgradeFailure)
	}
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stopCh, readyCh, io.Discard, io.Discard)
	if err != nil {
		return "", nil, err
	}
	var once sync.Once
	stop := func() { once.Do(func() { close(stopCh) }) }
	errCh := make(chan error, 1)
	go func() { errCh <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-errCh:
		stop()
		return "", nil, fmt.Errorf("port-forward to %s/%s: %w", namespace, pod, err)
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		stop()
		return "", nil, fmt.Errorf("port-forward to %s/%s: no local port (%v)", namespace, pod, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local), stop, nil
}
