package operatorrun

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/record"
)

// Base is what each binary's serve starts from: API clients, the probe and
// metrics server running in the background of a Process, and an event
// recorder.
type Base struct {
	Clients  *Clients
	Server   *Server
	Process  *Process
	Recorder record.EventRecorder
	// Leadership shows which replica leads; the leader's work calls its
	// Working once it runs.
	Leadership *Leadership

	stopEvents func()
	id         Identity
	log        *logrus.Entry
}

// Start builds the clients and the server (whose registry gets the clients'
// request counter), runs the server under a new Process, and starts the event
// recorder. The context it returns ends with ctx or at the Process's first
// fatal error. Callers defer Stop.
func Start(ctx context.Context, binary, kubeconfig, listenAddr string, id Identity, log *logrus.Entry) (*Base, context.Context, error) {
	clients, err := NewClients(kubeconfig, binary, log)
	if err != nil {
		return nil, ctx, err
	}
	srv, err := NewServer(listenAddr)
	if err != nil {
		return nil, ctx, fmt.Errorf("listen on %s: %w", listenAddr, err)
	}
	clients.RegisterMetrics(srv.Registry)
	proc, ctx := NewProcess(ctx, log)
	proc.Go(ctx, "HTTP server", srv.Run)
	recorder, stopEvents := NewEventRecorder(clients.Kube, binary, id.PodName, log)
	leadership := NewLeadership(clients.Kube, id, binary, srv.Registry, log)
	return &Base{Clients: clients, Server: srv, Process: proc, Recorder: recorder, Leadership: leadership,
		stopEvents: stopEvents, id: id, log: log}, ctx, nil
}

// Stop stops the event recorder and cancels the Process, for the returns
// before Process.RunAsLeader.
func (b *Base) Stop() {
	b.stopEvents()
	b.Process.Cancel()
}

// LeaderConfig is the election of lockName by this process: its pod is the
// contender, gets the events about the lock and the leader label; /readyz is
// ready once it may contend, and says why it cannot when the role allows no
// lock.
func (b *Base) LeaderConfig(lockName string) LeaderConfig {
	return LeaderConfig{
		Kube: b.Clients.Kube, Namespace: b.id.Namespace, LockName: lockName, Identity: b.id.PodName, Log: b.log,
		Recorder: b.Recorder, PodName: b.id.PodName, Unready: b.Server.SetUnreadyReason,
		Ready: func() { b.Server.SetReady(true) }, Leadership: b.Leadership,
	}
}
