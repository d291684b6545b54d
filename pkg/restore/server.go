package restore

import (
	"context"
	"encoding/json"
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

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
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
	// ArchivePathPrefix starts the URLs of the archive a restore to a point
	// replays: /v1/archive/<namespace>/<name> lists its chunks
	// (ArchiveManifest), /v1/archive/<namespace>/<name>/<chunk name> is one
	// of them, as stored.
	ArchivePathPrefix = "/v1/archive/"
)

// ArchiveURL is where the seed of a restore to a point gets the archive it
// replays; see BackupURL.
func ArchiveURL(serviceName, operatorNamespace, clusterDomain, namespace, name string) string {
	u := BackupURL(serviceName, operatorNamespace, clusterDomain, namespace, name)
	return strings.Replace(u, BackupPathPrefix, ArchivePathPrefix, 1)
}

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
// The token is checked first, in memory (Tokens): any pod can reach the server,
// and a request without the restore's token must neither learn anything nor
// cost a call on the API client the operator shares with its restores. Every
// request that is not served is refused with one answer (refuse), whatever the
// reason: no token or a wrong one, a restore that does not exist, is in another
// namespace, or is not in progress. Only then is the EtcdRestore read, from the
// API server and not from a cache: the seed asks moments after its restore
// entered Restoring, and a 404 is final for it.
type BackupHandler struct {
	Client versioned.Interface
	// Tokens are the tokens of the restores this operator runs, as its Flow
	// keeps them (Config.Tokens).
	Tokens *Tokens
	// Namespace is the operator's, for the short /v1/backup/<name> form.
	Namespace string
	// ClusterWide serves the restores a cluster-wide operator runs (those with the
	// scope annotation, in any namespace); otherwise only those a namespaced one
	// runs (without it, in Namespace). See Config.ClusterWide.
	ClusterWide bool
	Open        OpenFunc
	Log         *logrus.Entry
}

// refusal is the body of every refusal. It names no restore and no reason: a
// client without the token must learn nothing, and the seed's fetch gives up at
// any 404 anyway. The operator's log says why.
const refusal = "no backup to serve: the backup server serves only the backup of a restore in progress, to the seed that presents the restore's token\n"

// refuse answers every request that is not served, and always alike.
func refuse(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, refusal)
}

func (h *BackupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		// Says nothing about any restore.
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	var namespace, name, chunk string
	var pathOK, archived bool
	if rest, ok := strings.CutPrefix(r.URL.Path, ArchivePathPrefix); ok {
		archived = true
		namespace, name, chunk, pathOK = parseArchivePath(rest)
	} else {
		namespace, name, pathOK = h.parsePath(r.URL.Path)
	}
	log := h.Log.WithFields(logrus.Fields{"restore-name": name, "restore-namespace": namespace, "client": r.RemoteAddr})
	plan, store, ok := h.authorize(w, r, log, namespace, name, pathOK)
	if !ok {
		return
	}
	if archived {
		h.serveArchive(w, r, log, plan, store, chunk)
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

// authorize lets through a request that presents the token of a restore in
// progress that this operator runs, and opens that restore's store; it
// answers any other itself (see BackupHandler).
func (h *BackupHandler) authorize(w http.ResponseWriter, r *http.Request, log *logrus.Entry, namespace, name string, pathOK bool) (*Plan, backup.Store, bool) {
	presented, bearer := strings.CutPrefix(r.Header.Get("Authorization"), bearerPrefix)
	from, _, _ := net.SplitHostPort(r.RemoteAddr)
	uid, token, known := h.Tokens.check(namespace, name, presented, from)
	if !pathOK || !bearer || !known || (!h.ClusterWide && namespace != h.Namespace) {
		// Anyone may send these: logged only at debug level, so that they
		// cannot flood the log.
		log.Debug("refused a request without the token of a restore this operator runs")
		refuse(w)
		return nil, nil, false
	}
	// The client holds the restore's token: from here on it may cost API calls.
	er, err := h.Client.EtcdV1beta2().EtcdRestores(namespace).Get(r.Context(), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		log.Info("refused: the EtcdRestore is gone")
		h.Tokens.forget(namespace, name, uid)
		refuse(w)
		return nil, nil, false
	case err != nil:
		log.Warnf("serving the backup: %v", err)
		http.Error(w, "read the EtcdRestore: "+err.Error(), http.StatusServiceUnavailable)
		return nil, nil, false
	}
	switch {
	case er.UID != uid:
		log.Info("refused: the EtcdRestore was deleted and created again under its name")
		h.Tokens.forget(namespace, name, uid)
		refuse(w)
		return nil, nil, false
	case !api.IsManagedBy(er, h.ClusterWide):
		log.Infof("refused: the EtcdRestore is run by the other kind of restore operator (annotation %s)", api.ScopeAnnotation)
		refuse(w)
		return nil, nil, false
	case StatusOf(er).Phase != api.RestorePhaseRestoring:
		log.Infof("refused: the EtcdRestore is in phase %q, not in progress", StatusOf(er).Phase)
		if Finished(er) {
			h.Tokens.forget(namespace, name, uid)
		}
		refuse(w)
		return nil, nil, false
	}
	plan, err := verifiedPlan(er, token)
	if err != nil {
		log.Warnf("refused: %v", err)
		http.Error(w, fmt.Sprintf("EtcdRestore %s/%s: %v", namespace, name, err), http.StatusForbidden)
		return nil, nil, false
	}
	store, _, err := h.Open(r.Context(), namespace, &plan.Source)
	if err != nil {
		log.Warnf("serving the backup: open the store: %v", err)
		http.Error(w, "open the backup store: "+err.Error(), http.StatusBadGateway)
		return nil, nil, false
	}
	return plan, store, true
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
	mux.Handle(ArchivePathPrefix, h)
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

// parseArchivePath splits <namespace>/<name> and <namespace>/<name>/<chunk>.
func parseArchivePath(rest string) (namespace, name, chunk string, ok bool) {
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return "", "", "", false
	}
	if len(parts) == 3 {
		if parts[2] == "" {
			return "", "", "", false
		}
		chunk = parts[2]
	}
	return parts[0], parts[1], chunk, true
}

// serveArchive serves the archive of a restore to a point: the manifest of
// the chunks its plan replays, checked to be the ones the plan recorded, or
// one of them as stored. The seed checks each chunk against the sha256 in its
// name, and decrypts it itself: the key never leaves the pod, as for the
// snapshot.
func (h *BackupHandler) serveArchive(w http.ResponseWriter, r *http.Request, log *logrus.Entry, plan *Plan, store backup.Store, chunk string) {
	pp := plan.Point
	if !pp.Replays() {
		log.Info("refused: the restore replays no archive")
		refuse(w)
		return
	}
	if chunk == "" {
		all, err := archive.List(r.Context(), store, pp.Prefix)
		if err != nil {
			log.Warnf("serving the archive: %v", err)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		chunks, err := archive.Covering(all, pp.SnapshotRevision, pp.Revision)
		if err == nil && ChunkListDigest(chunks) != pp.ChunksSHA256 {
			err = errors.New("the chunks of the archive changed since the restore checked them")
		}
		if err != nil {
			log.Warnf("serving the archive: %v", err)
			http.Error(w, "the archive: "+err.Error(), http.StatusConflict)
			return
		}
		m := ArchiveManifest{After: pp.SnapshotRevision, Revision: pp.Revision, Chunks: make([]ManifestChunk, len(chunks))}
		for i, c := range chunks {
			m.Chunks[i] = ManifestChunk{Name: strings.TrimPrefix(c.Key, pp.Prefix), Size: c.Size}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
		log.Infof("served the manifest of the archive: %d chunks, revisions %d to %d", len(chunks), pp.SnapshotRevision+1, pp.Revision)
		return
	}
	// Only a chunk of the plan's range, under its prefix: the token opens
	// nothing else in the bucket.
	c, ok := archive.ParseChunkName(pp.Prefix, backup.ObjectInfo{Key: pp.Prefix + chunk})
	if !ok || c.Last <= pp.SnapshotRevision || c.First > pp.Revision {
		log.Infof("refused: %q is not a chunk the restore replays", chunk)
		http.Error(w, fmt.Sprintf("%q is not a chunk of revisions %d to %d", chunk, pp.SnapshotRevision+1, pp.Revision), http.StatusNotFound)
		return
	}
	rc, size, err := store.Get(r.Context(), c.Key)
	if errors.Is(err, backup.ErrNotFound) {
		http.Error(w, fmt.Sprintf("chunk %s was deleted after the restore checked it", c.Key), http.StatusGone)
		return
	}
	if err != nil {
		log.Warnf("serving the archive: %v", err)
		http.Error(w, "read the chunk: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = rc.Close() }()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(size))
	if n, err := io.Copy(w, rc); err != nil {
		log.Warnf("serving chunk %s: stopped after %d of %d bytes: %v", c.Key, n, size, err)
	}
}
