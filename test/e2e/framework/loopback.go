package framework

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// LoopbackForward is a TCP forwarder from a loopback port of this host to
// another address.
//
// A client on the host reaches a cluster through its client Service's
// cluster IP, but the server certificates of a TLS cluster name the
// Service's DNS names and 127.0.0.1, not that IP; through the forwarder a
// client that checks the server's name (kube-apiserver's etcd client does,
// against the endpoint's host) connects to 127.0.0.1 and the check passes.
type LoopbackForward struct {
	// Addr is the loopback address to connect to.
	Addr string

	target string
	ln     net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// ForwardLoopback listens on a free loopback port and forwards every
// connection to target until Close.
func ForwardLoopback(target string) (*LoopbackForward, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the forward to %s: %w", target, err)
	}
	l := &LoopbackForward{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	go l.serve()
	return l, nil
}

func (l *LoopbackForward) serve() {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		go l.forward(in)
	}
}

// forward copies one connection both ways; when either side ends, both are
// closed, so the client sees what a direct connection would.
func (l *LoopbackForward) forward(in net.Conn) {
	out, err := net.DialTimeout("tcp", l.target, 5*time.Second)
	if err != nil {
		in.Close()
		return
	}
	if !l.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
	in.Close()
	out.Close()
	<-done
	l.untrack(in, out)
}

func (l *LoopbackForward) track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	for _, c := range conns {
		l.conns[c] = true
	}
	return true
}

func (l *LoopbackForward) untrack(conns ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range conns {
		delete(l.conns, c)
	}
}

// DropConnections ends every connection the forward carries, and returns how
// many, and goes on accepting new ones: its clients must dial again, and each
// new connection makes a new TLS handshake with whatever the target serves by
// then.
func (l *LoopbackForward) DropConnections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		_ = c.Close()
	}
	// Each forwarded connection is tracked with its two ends.
	return len(l.conns) / 2
}

// Close stops listening and ends every forwarded connection.
func (l *LoopbackForward) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	_ = l.ln.Close()
	for c := range l.conns {
		_ = c.Close()
	}
}
