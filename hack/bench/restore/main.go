// Command restore measures the data path of a restore on a large snapshot: the
// time the restore operator takes to read the backup through and check it before
// it touches the cluster, the time a seed pod's fetch-backup takes to download
// it through the operator's backup server and check it again, the time
// `etcdutl snapshot restore` takes to unpack it, the time etcd takes to
// start on the restored data directory, and the time a restore to a point
// then takes to replay an archived hour of changes from the store.
//
// Everything runs on this machine: an embedded etcd is filled and snapshotted
// into an in-process S3 server (gofakes3, in memory, so the store itself is
// faster than a real one), and etcd and etcdutl are the release binaries in
// -etcd-bin-dir. What a real restore adds on top is Kubernetes' part: deleting
// the old pods (their grace period), scheduling the seed, the DNS wait of its
// first init container, and the other members joining one at a time, each
// receiving the whole database from the leader (test/e2e/restore_test.go with
// E2E_RESTORE_BENCH_MIB measures that too).
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

func main() {
	sizeMiB := flag.Int("size-mib", 512, "data written to etcd before the snapshot")
	valueKiB := flag.Int("value-kib", 256, "size of each value")
	binDir := flag.String("etcd-bin-dir", os.Getenv("ETCD_BIN_DIR_3_5"), "directory with the etcd and etcdutl binaries of etcd 3.5 (the local cluster's env file sets ETCD_BIN_DIR_3_5)")
	reportPath := flag.String("report", "", "also write the steps' times as JSON to this file, for hack/gen-docs backup-restore (run.sh names it)")
	hourRate := flag.Int("hour-writes-per-second", 10, "after etcd starts on the snapshot, replay from the store an archive of an hour of writes at this rate, as a restore to a point does (0: none)")
	flag.Parse()
	if err := bench(*sizeMiB, *valueKiB, *hourRate, *binDir, *reportPath); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func bench(sizeMiB, valueKiB, hourRate int, binDir, reportPath string) error {
	if binDir == "" {
		return fmt.Errorf("no -etcd-bin-dir: point it at an etcd 3.5 release (etcd and etcdutl)")
	}
	for _, b := range []string{"etcd", "etcdutl"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "restore-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx := context.Background()

	// The snapshot, as the backup operator stores it.
	s3, err := backuptest.StartS3(nil, "bench")
	if err != nil {
		return err
	}
	defer s3.Close()
	store, err := s3store.New(s3.StoreConfig("bench"))
	if err != nil {
		return err
	}
	keys := sizeMiB << 20 / (valueKiB << 10)
	if err := snapshotInto(ctx, filepath.Join(dir, "source"), store, sizeMiB, keys, valueKiB<<10); err != nil {
		return err
	}
	loc := storage.Location{Bucket: "bench", Key: "snapshot.db"}

	var total time.Duration
	var vb restore.VerifiedBackup
	rep := benchreport.RestoreDataPath{SizeMiB: sizeMiB, ValueKiB: valueKiB, Keys: keys, HourWritesPerSecond: hourRate}
	// size is read after fn: the first step is what learns it.
	step := func(name string, size *int64, fn func() error) error {
		start := time.Now()
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d := time.Since(start)
		total += d
		rate, s := "", benchreport.RestoreStep{Step: name, Seconds: d.Seconds()}
		if size != nil {
			s.MiBPerSecond = float64(*size) / (1 << 20) / d.Seconds()
			rate = fmt.Sprintf(" (%.0f MiB/s)", s.MiBPerSecond)
		}
		rep.Steps = append(rep.Steps, s)
		fmt.Printf("%-62s %8.2fs%s\n", name, d.Seconds(), rate)
		return nil
	}

	// 1. The operator reads the backup through before it touches the cluster.
	if err := step("the operator reads the backup through and checks it", &vb.Size, func() error {
		vb, err = restore.VerifySnapshot(ctx, store, loc, nil)
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("  snapshot: %.1f MiB, sha256 %s\n", float64(vb.Size)/(1<<20), vb.SHA256)
	rep.SnapshotMiB = float64(vb.Size) / (1 << 20)

	// 2. The seed downloads it through the backup server and checks it again.
	url, token, stop, err := backupServer(ctx, s3, vb)
	if err != nil {
		return err
	}
	defer stop()
	backupFile := filepath.Join(dir, "latest.backup")
	if err := step("the seed downloads it through the backup server and checks it", &vb.Size, func() error {
		return restore.Fetch(ctx, restore.FetchOptions{URL: url, Out: backupFile, Size: vb.Size, SHA256: vb.SHA256, Token: token, Timeout: 30 * time.Minute})
	}); err != nil {
		return err
	}

	// 3. restore-datadir: etcdutl unpacks it, checking the trailer once more.
	dataDir := filepath.Join(dir, "data")
	peer := "http://127.0.0.1:32380"
	if err := step("`etcdutl snapshot restore`", &vb.Size, func() error {
		return run(filepath.Join(binDir, "etcdutl"), "snapshot", "restore", backupFile, "--data-dir="+dataDir,
			"--name=seed", "--initial-cluster=seed="+peer, "--initial-cluster-token=bench", "--initial-advertise-peer-urls="+peer)
	}); err != nil {
		return err
	}
	_ = os.Remove(backupFile)

	// 4. The seed's etcd starts on the restored data and serves every key.
	client := "http://127.0.0.1:32379"
	etcd := exec.Command(filepath.Join(binDir, "etcd"), "--data-dir="+dataDir, "--name=seed",
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=seed="+peer,
		"--quota-backend-bytes="+fmt.Sprint(int64(sizeMiB)*3<<20+1<<30), "--log-level=error")
	var etcdLog bytes.Buffer
	etcd.Stdout, etcd.Stderr = &etcdLog, &etcdLog
	if err := step("etcd starts on the restored data and serves all keys", nil, func() error {
		if err := etcd.Start(); err != nil {
			return err
		}
		return waitKeys(ctx, client, keys)
	}); err != nil {
		return fmt.Errorf("%w\netcd log:\n%s", err, etcdLog.String())
	}
	defer func() {
		_ = etcd.Process.Kill()
		_ = etcd.Wait()
	}()

	// 5. A restore to a point replays the archive after the snapshot.
	if hourRate > 0 {
		c, err := etcdutil.NewClientContext(ctx, etcdutil.ClientConfig{Endpoints: []string{client}})
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		resp, err := c.Get(ctx, "/", clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		after := resp.Header.Revision
		if err := archiveAnHour(ctx, store, after, hourRate); err != nil {
			return err
		}
		revisions := int64(3600 * hourRate)
		name := fmt.Sprintf("the archive's hour of changes (%d writes/s, %d revisions) read from the store and replayed", hourRate, revisions)
		if err := step(name, nil, func() error {
			done, err := archive.Replay(ctx, c, archive.ReplayOptions{Store: store, Prefix: hourPrefix, After: after, Log: quietLog()})
			if err == nil && int64(done.Revisions) != revisions {
				err = fmt.Errorf("replayed %d revisions, want %d", done.Revisions, revisions)
			}
			return err
		}); err != nil {
			return err
		}
	}
	rep.Steps = append(rep.Steps, benchreport.RestoreStep{Step: "the whole data path", Seconds: total.Seconds()})
	fmt.Printf("%-62s %8.2fs\n", "the whole data path", total.Seconds())
	if reportPath == "" {
		return nil
	}
	if rep.EtcdVersion, err = benchreport.ToolVersion(filepath.Join(binDir, "etcd"), []string{"--version"}, "etcd Version: "); err != nil {
		return err
	}
	return benchreport.Write(reportPath, rep)
}

// snapshotInto fills an embedded etcd and stores its snapshot as snapshot.db.
func snapshotInto(ctx context.Context, dir string, store backup.Store, sizeMiB, keys, valueSize int) error {
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: dir, QuotaBytes: int64(sizeMiB)*3<<20 + 1<<30})
	if err != nil {
		return err
	}
	defer e.Close()
	start := time.Now()
	if err := e.Fill(ctx, "/bench/", keys, valueSize); err != nil {
		return err
	}
	fmt.Printf("filled etcd with %d keys of %d KiB in %.1fs\n", keys, valueSize>>10, time.Since(start).Seconds())
	start = time.Now()
	snap, err := backup.SaveSnapshot(ctx, backup.Source{Endpoints: []string{e.Endpoint}}, store, func(int64) string { return "snapshot.db" })
	if err != nil {
		return err
	}
	fmt.Printf("backed up %.1f MiB in %.1fs (not part of the restore)\n", float64(snap.Size)/(1<<20), time.Since(start).Seconds())
	return nil
}

// hourPrefix is where the archive of the hour after the snapshot is stored.
const hourPrefix = "archive/"

// archiveAnHour stores, as the archiver would, an hour of writes at rate per
// second after revision after: puts of 256 bytes over 10 000 keys, one
// revision each, in chunks of a second compressed with zstd.
func archiveAnHour(ctx context.Context, store backup.Store, after int64, rate int) error {
	start := time.Now()
	value := []byte(strings.Repeat("v", 256))
	codec := backup.Codec{Compression: backup.CompressionZstd}
	begin := time.Now().Add(-time.Hour)
	var evs []archive.Event
	total := 3600 * rate
	for i := range total {
		rev := after + 1 + int64(i)
		evs = append(evs, archive.Event{
			Event:    mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: fmt.Appendf(nil, "/bench-hour/%05d", i%10000), Value: value, ModRevision: rev, CreateRevision: rev, Version: 1}},
			Received: begin.Add(time.Duration(i) * time.Second / time.Duration(rate)),
		})
		if len(evs) < rate && i < total-1 {
			continue
		}
		c, data, err := archive.BuildChunk(hourPrefix, codec, evs[0].Revision(), evs)
		if err != nil {
			return err
		}
		if _, _, err := store.Put(ctx, c.Key, bytes.NewReader(data)); err != nil {
			return err
		}
		evs = nil
	}
	fmt.Printf("archived an hour of %d writes/s in %.1fs (not part of the restore)\n", rate, time.Since(start).Seconds())
	return nil
}

// quietLog is a log of warnings and errors only: the bench prints its own
// figures.
func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	return logrus.NewEntry(l)
}

// backupServer serves the backup the way the operator does, for an EtcdRestore in
// progress whose plan pins vb, and returns the seed's URL and the restore's token,
// which the seed presents. The restore's token is in a Secret it owns, as the
// operator makes it; the plan is signed with it (restore.PlanMACAnnotation), and
// the flow's LoadTokens hands it to the server, as at the operator's start.
func backupServer(ctx context.Context, s3 *backuptest.S3, vb restore.VerifiedBackup) (string, string, func(), error) {
	spec := api.RestoreSpec{
		BackupStorageType: api.BackupStorageTypeS3,
		RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
			Path: vb.Path, AWSSecret: "aws", Endpoint: s3.URL, ForcePathStyle: true,
		}},
		EtcdCluster: api.EtcdClusterRef{Name: "bench"},
	}
	plan, err := json.Marshal(&restore.Plan{Source: spec, Backup: vb})
	if err != nil {
		return "", "", nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", nil, err
	}
	token := hex.EncodeToString(raw)
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write(plan)
	er := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "ns", UID: types.UID("bench-restore"), Annotations: map[string]string{
			restore.PlanAnnotation:    string(plan),
			restore.PlanMACAnnotation: hex.EncodeToString(mac.Sum(nil)),
		}},
		Spec:   spec,
		Status: api.RestoreStatus{Phase: api.RestorePhaseRestoring},
	}
	kube := kubefake.NewSimpleClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws", Namespace: "ns"}, Data: backuptest.AWSSecretData()},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: restore.TokenSecretName(er.UID), Namespace: "ns",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: api.SchemeGroupVersion.String(), Kind: api.EtcdRestoreResourceKind, Name: er.Name, UID: er.UID}}},
			Data: map[string][]byte{restore.TokenKey: []byte(token)},
		})
	etcdClient := fake.NewSimpleClientset(er)
	log := quietLog()
	tokens := restore.NewTokens()
	restore.NewFlow(restore.Config{Kube: kube, Etcd: etcdClient, Log: log, Tokens: tokens}).
		LoadTokens(ctx, []*api.EtcdRestore{er})
	h := &restore.BackupHandler{Client: etcdClient, Namespace: "ns", Tokens: tokens,
		Open: restore.StoreOpener(kube.CoreV1(), storage.CloudIdentity{}), Log: log}
	mux := http.NewServeMux()
	mux.Handle(restore.BackupPathPrefix, h)
	srv := httptest.NewServer(mux)
	return srv.URL + restore.BackupPathPrefix + "ns/bench", token, srv.Close, nil
}

func waitKeys(ctx context.Context, endpoint string, want int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		c, err := etcdutil.NewClientContext(ctx, etcdutil.ClientConfig{Endpoints: []string{endpoint}})
		if err == nil {
			resp, err := c.Get(ctx, "/bench/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			_ = c.Close()
			if err == nil && int(resp.Count) == want {
				return nil
			}
			if err == nil {
				return fmt.Errorf("restored etcd has %d keys, want %d", resp.Count, want)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd did not serve within 5m: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
