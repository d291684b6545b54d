package operatorrun

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// Server serves /healthz, /readyz and /metrics (with the Go and process
// collectors and the build-info gauge from the start). /readyz is ready once the process
// may contend for the leader-election lock, whether it leads or stands by: a
// rolling update waits for the new pod to be Ready before it stops the old one,
// and a standby never Ready would hold it up for ever. Which replica leads is
// shown by Leadership (a gauge, a label on the leader's pod).
type Server struct {
	ready atomic.Bool
	// why is what /readyz says while not ready, when something other than
	// standing by keeps the process from working.
	why      atomic.Pointer[string]
	Registry *prometheus.Registry
	srv      *http.Server
	mux      *http.ServeMux
	listener net.Listener
}

// NewServer listens on addr (for example 0.0.0.0:8080) right away, so that a port in
// use is reported at startup.
func NewServer(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{Registry: prometheus.NewRegistry(), listener: ln}
	promutil.Register(s.Registry, collectors.NewGoCollector())
	promutil.Register(s.Registry, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promutil.Register(s.Registry, NewBuildInfo(Version, GitSHA))
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			msg := "not ready"
			if why := s.why.Load(); why != nil && *why != "" {
				msg += ": " + *why
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.mux = mux
	return s, nil
}

// ServeProfiles adds Go's runtime profiles under /debug/pprof/ (what `go tool
// pprof` reads). They are off unless asked for: they show the process's
// internals to whoever reaches the port, and a CPU profile costs while it runs.
func (s *Server) ServeProfiles() {
	s.mux.HandleFunc("/debug/pprof/", pprof.Index)
	s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// SetReady flips /readyz.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// SetUnreadyReason makes /readyz say why the process cannot work, for a
// user reading the probe's failure in `kubectl describe pod`; "" goes back to
// a plain "not ready".
func (s *Server) SetUnreadyReason(why string) {
	s.why.Store(&why)
}

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		// ctx is done: the shutdown gets time of its own.
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(shutdownCtx)
	}()
	if err := s.srv.Serve(s.listener); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
