package operatorrun

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// replica is one operator process as Start makes it (without its event
// recorder), on a fake apiserver shared with others, its server listening on
// a free port of 127.0.0.1.
type replica struct {
	*Base
	logs    *logtest.Hook
	done    chan error
	working chan struct{}
}

func newReplica(t *testing.T, kube kubernetes.Interface, pod string) *replica {
	t.Helper()
	srv, err := NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger, hook := logtest.NewNullLogger()
	log := logrus.NewEntry(logger)
	proc, ctx := NewProcess(t.Context(), log)
	proc.Go(ctx, "HTTP server", srv.Run)
	b := &Base{Clients: &Clients{Kube: kube}, Server: srv, Process: proc, stopEvents: func() {},
		id: Identity{Namespace: "ns", PodName: pod}, log: log}
	return &replica{Base: b, logs: hook, done: make(chan error, 1), working: make(chan struct{})}
}

// run contends for the lock etcd-operator, working (see working) while it
// leads, until stop.
func (r *replica) run(t *testing.T, working func(ctx context.Context)) {
	go func() {
		r.done <- r.Process.RunAsLeader(r.LeaderConfig("etcd-operator"), testDeadline, func(ctx context.Context) {
			if working != nil {
				working(ctx)
			}
			close(r.working)
			<-ctx.Done()
		})
	}()
	t.Cleanup(r.stop)
}

// stop shuts the replica down as a SIGTERM does and returns how RunAsLeader
// ended.
func (r *replica) stop() {
	r.Process.Cancel()
	err := <-r.done
	r.done <- err // a second stop returns at once
}

// waitReadyz polls /readyz until it answers code with a body holding want.
func waitReadyz(t *testing.T, srv *Server, code int, want string) {
	t.Helper()
	var got int
	var body string
	for deadline := time.Now().Add(testDeadline); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got, body = get(t, "http://"+srv.Addr()+"/readyz"); got == code && strings.Contains(body, want) {
			return
		}
	}
	t.Fatalf("/readyz answers %d %q, want %d with %q", got, body, code, want)
}

// /readyz does not depend on leading: a rolling update waits for the new pod
// to be Ready before it stops the old leader, so a standby that is never
// Ready would hold the update up for ever.
func TestReadyzSaysWhetherTheReplicaCanTakeOverNotWhetherItLeads(t *testing.T) {
	for _, tc := range []struct {
		name     string
		granted  []string
		leader   bool // another replica holds the lock
		wantCode int
		wantBody string
	}{
		{"a standby whose role grants a lock is ready while another replica leads",
			[]string{"leases", "endpoints:get"}, true, http.StatusOK, "ok"},
		{"the leader is ready", []string{"leases", "endpoints:get"}, false, http.StatusOK, "ok"},
		{"a replica whose role grants no lock is not ready and says which rule to add",
			nil, true, http.StatusServiceUnavailable, "add the rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := fake.NewClientset(ownPod())
			if tc.leader {
				other := startCandidate(t, shared, "op-leader", "leases", "endpoints:get")
				receive(t, other.led, "the other replica leading")
			}
			r := newReplica(t, replicaKube{Interface: shared, role: grant(fake.NewClientset(), tc.granted...)}, "op-1")
			r.run(t, nil)
			waitReadyz(t, r.Server, tc.wantCode, tc.wantBody)
			select {
			case <-r.working:
				if tc.leader {
					t.Error("the standby leads beside the other replica")
				}
			default:
			}
		})
	}
}
