package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
)

const (
	// BackupServerPort is where seed pods download backups from, as in the original.
	BackupServerPort = 19999
	// BackupPathPrefix starts the backup server's URLs: /v1/backup/<name> for a
	// restore in the operator's namespace (the original's form) and
	// /v1/backup/<namespace>/<name> for any namespace.
	BackupPathPrefix = "/v1/backup/"
)

// BackupURL is where the seed of a restore downloads its backup: the operator's
// Service in its own namespace, reached by DNS name from any namespace.
// clusterDomain is the restored cluster's spec.pod.ClusterDomain (".cluster.local"
// or empty), used the same way as for member names.
func BackupURL(serviceName, operatorNamespace, clusterDomain, namespace, name string) string {
	if clusterDomain != "" && !strings.HasPrefix(clusterDomain, ".") {
		clusterDomain = "." + clusterDomain
	}
	return fmt.Sprintf("http://%s.%s.svc%s:%d%s%s/%s",
		serviceName, operatorNamespace, clusterDomain, BackupServerPort, BackupPathPrefix, namespace, name)
}

// BackupHandler serves the backups of restores in progress, and nothing else,
// only to a client that presents the restore's token (the seed, which has it
// mounted; see token.go), and only the object its signed plan names: it must not
// turn into a way to read any backup in any bucket. An EtcdRestore is in progress
// from the moment its backup was verified and its plan written (phase Restoring)
// until it completes or fails. The object is streamed from the store to the
// client; nothing is buffered beyond io.Copy's buffer.
//
// The EtcdRestore is read from the API server, not from a cache: the seed asks
// moments after its restore entered Restoring, and a 404 is final for it.
type BackupHandler struct {
	Client versioned.Interface
	// Kube reads the restores' token Secrets.
	Kube kubernetes.Interface
	// Namespace is the operator's, for the short /v1/backup/<name> form.
	Namespace string
	// ClusterWide serves the restores a cluster-wide operator runs (those with the
	// scope annotation, in any namespace); otherwise only those a namespaced one
	// runs (without it, in Namespace). See Config.ClusterWide.
	ClusterWide bool
	Open        OpenFunc
	Log         *logrus.Entry
}

func (h *BackupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	namespace, name, ok := h.parsePath(r.URL.Path)
	if !ok {
		http.Error(w, "use "+BackupPathPrefix+"<restore-name> or "+BackupPathPrefix+"<namespace>/<restore-name>", http.StatusNotFound)
		return
	}
	log := h.Log.WithFields(logrus.Fields{"restore-name": name, "restore-namespace": namespace, "client": r.RemoteAddr})
	if !h.ClusterWide && namespace != h.Namespace {
		http.Error(w, fmt.Sprintf("this operator restores only in namespace %s", h.Namespace), http.StatusNotFound)
		return
	}
	er, err := h.Client.EtcdV1beta2().EtcdRestores(namespace).Get(r.Context(), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		http.Error(w, fmt.Sprintf("no EtcdRestore %s/%s", namespace, name), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !api.IsManagedBy(er, h.ClusterWide) {
		http.Error(w, fmt.Sprintf("EtcdRestore %s/%s is run by the other kind of restore operator (annotation %s)", namespace, name, api.ScopeAnnotation), http.StatusNotFound)
		return
	}
	if er.Status.Phase != api.RestorePhaseRestoring {
		phase := string(er.Status.Phase)
		if phase == "" {
			phase = "not started"
		}
		http.Error(w, fmt.Sprintf("EtcdRestore %s/%s is %s; only the backups of restores in progress are served", namespace, name, phase), http.StatusNotFound)
		return
	}
	token, err := readToken(r.Context(), h.Kube.CoreV1(), er)
	if err != nil {
		log.Warnf("refused: %v", err)
		http.Error(w, fmt.Sprintf("EtcdRestore %s/%s has no token to check the request against", namespace, name), http.StatusNotFound)
		return
	}
	presented, ok := strings.CutPrefix(r.Header.Get("Authorization"), bearerPrefix)
	if !ok || !tokenMatches(presented, token) {
		log.Warn("refused a request without the restore's token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="etcd-restore"`)
		http.Error(w, "the restore's token (Secret "+TokenSecretName(er.UID)+") is required", http.StatusUnauthorized)
		return
	}
	plan, err := verifiedPlan(er, token)
	if err != nil {
		log.Warnf("refused: %v", err)
		http.Error(w, fmt.Sprintf("EtcdRestore %s/%s: %v", namespace, name, err), http.StatusForbidden)
		return
	}
	store, _, err := h.Open(r.Context(), namespace, &plan.Source)
	if err != nil {
		log.Warnf("serving the backup: open the store: %v", err)
		http.Error(w, "open the backup store: "+err.Error(), http.StatusBadGateway)
		return
	}
	loc, err := storage.ParsePath(plan.Backup.Path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rc, size, err := store.Get(r.Context(), loc.Key)
	if errors.Is(err, backup.ErrNotFound) {
		http.Error(w, fmt.Sprintf("backup %s was deleted after it was verified", loc.Path()), http.StatusGone)
		return
	}
	if err != nil {
		log.Warnf("serving the backup: %v", err)
		http.Error(w, "read the backup: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = rc.Close() }()
	if size != plan.Backup.Size {
		// Replaced since it was verified: the seed would reject it anyway.
		http.Error(w, fmt.Sprintf("backup %s is %d bytes now, but %d bytes were verified; it was replaced during the restore", loc.Path(), size, plan.Backup.Size), http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(size))
	start := time.Now()
	n, err := io.Copy(w, rc)
	if err != nil {
		log.Warnf("serving backup %s: stopped after %d of %d bytes: %v", loc.Path(), n, size, err)
		return
	}
	log.Infof("served backup %s (%d bytes in %.1fs)", loc.Path(), n, time.Since(start).Seconds())
}

// parsePath splits /v1/backup/<name> and /v1/backup/<namespace>/<name>.
func (h *BackupHandler) parsePath(p string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(p, BackupPathPrefix)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return h.Namespace, parts[0], true
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], true
	}
	return "", "", false
}

// ServeBackups serves h on ln until ctx is done. There is no write timeout: a
// multi-GiB backup legitimately takes minutes to send.
func ServeBackups(ctx context.Context, ln net.Listener, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle(BackupPathPrefix, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		// ctx is done: the shutdown gets time of its own.
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
