package checker

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// remotes are the addresses the run's connections last reached. The member
// behind a connection shows in an answer's header only when a member of the
// cluster answers; when something else answers (an HTTP server saying 404,
// an address that hangs), the address is all there is to name it. For a
// client given members' addresses that is the member's; for a client of a
// Service it is the Service's, since the proxy's choice of pod is invisible
// to the client: it then tells a Service's connection from a member's.
type remotes struct {
	mu   sync.Mutex
	last map[*grpc.ClientConn]string
}

func newRemotes() *remotes {
	return &remotes{last: map[*grpc.ClientConn]string{}}
}

// dialOptions record each request's remote address. They chain after
// clientv3's own interceptors, which retry: every attempt is recorded.
func (r *remotes) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(r.recordUnary),
		grpc.WithChainStreamInterceptor(r.recordStream),
	}
}

func (r *remotes) recordUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	r.saw(cc, &p)
	return err
}

func (r *remotes) recordStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err == nil {
		// A stream's context carries its transport's peer once it is open.
		p, _ := peer.FromContext(cs.Context())
		r.saw(cc, p)
	}
	return cs, err
}

func (r *remotes) saw(cc *grpc.ClientConn, p *peer.Peer) {
	if r == nil || p == nil || p.Addr == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last[cc] = p.Addr.String()
}

// of is the address cli's last request reached, "" when none is known.
func (r *remotes) of(cli *clientv3.Client) string {
	if r == nil || cli == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[cli.ActiveConnection()]
}
