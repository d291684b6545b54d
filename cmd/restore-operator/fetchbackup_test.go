package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/restore"
)

func TestFetchBackupParsesWhatTheSeedPodIsGiven(t *testing.T) {
	for _, a := range []restore.FetchArgs{
		{URL: "http://etcd-restore-operator.ops:19999/v1/backup/ns/c?x=1", Out: restore.BackupFile, Size: 1 << 40,
			SHA256: strings.Repeat("ab", 32), Timeout: 20 * time.Minute, TerminationLog: restore.DefaultTerminationLog},
		{URL: "http://s/v1/backup/a/b", Out: "/tmp/b", Size: 1, SHA256: strings.Repeat("0", 64), Timeout: 1500 * time.Millisecond,
			TerminationLog: "/tmp/t"},
		{URL: "http://s/v1/backup/a/b", Out: "/tmp/b", Size: 1, SHA256: strings.Repeat("0", 64), Timeout: time.Minute,
			TerminationLog: "/tmp/t", KeyFile: restore.KeyFile},
		{URL: "http://s/v1/backup/a/b", Out: "/tmp/b", Size: 1, SHA256: strings.Repeat("0", 64), Timeout: time.Minute,
			TerminationLog: "/tmp/t", DataDir: "/var/etcd/data", CopySelf: "/tmp/bin"},
	} {
		got, err := parseFetchBackup(a.Args(), io.Discard)
		if err != nil {
			t.Fatalf("parse %q: %v", a.Args(), err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("round trip of %+v gave %+v", a, got)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("valid arguments refused: %v", err)
		}
	}
}

func TestRestoreDataDirParsesWhatTheSeedPodIsGiven(t *testing.T) {
	a := restore.DataDirArgs{DataDir: "/var/etcd/data", StagingDir: "/var/etcd/data.restoring",
		Tool: []string{"/usr/local/bin/etcdutl", "snapshot", "restore", "/b", "--data-dir=/var/etcd/data.restoring", "--name=m"}}
	got, err := parseRestoreDataDir(a.Args(), io.Discard)
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip of %+v gave %+v, %v", a, got, err)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	if code := restoreDataDir(context.Background(), []string{"--data-dir=/d", "--staging-dir=/d"}, io.Discard); code != 2 {
		t.Errorf("no restore command and the data directory as staging: exit %d, want 2", code)
	}
}

func TestTheSeedPodRunsFetchBackupWithArgumentsItAccepts(t *testing.T) {
	pod := restore.NewSeedPod(restore.SeedConfig{
		Cluster: &api.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"},
			Spec:       api.ClusterSpec{Size: 3, Version: "3.5.21"},
		},
		MemberName:   "c-0000",
		BackupURL:    "http://s/v1/backup/ns/c",
		Backup:       restore.VerifiedBackup{Size: 42, SHA256: strings.Repeat("f", 64)},
		FetchImage:   "img",
		FetchTimeout: time.Minute,
	})
	var cmd []string
	for _, c := range pod.Spec.InitContainers {
		if c.Name == restore.FetchContainerName {
			cmd = c.Command
		}
	}
	if len(cmd) < 2 || cmd[1] != restore.FetchSubcommand {
		t.Fatalf("fetch command %q", cmd)
	}
	a, err := parseFetchBackup(cmd[2:], io.Discard)
	if err == nil {
		err = a.Validate()
	}
	if err != nil || a.Size != 42 || a.Timeout != time.Minute || a.Out != restore.BackupFile {
		t.Errorf("parsed %+v, %v", a, err)
	}
}

func TestFetchBackupRefusesBadArgumentsInItsTerminationLog(t *testing.T) {
	termLog := filepath.Join(t.TempDir(), "termination-log")
	var stderr bytes.Buffer
	code := fetchBackup(context.Background(), []string{"--url=http://x", "--size=0", "--sha256=XYZ", "--termination-log=" + termLog}, os.Getenv, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	msg, _ := os.ReadFile(termLog)
	for _, want := range []string{"--size must be positive", "--sha256 must be 64 lower-case hex digits"} {
		if !strings.Contains(string(msg), want) {
			t.Errorf("termination message %q does not contain %q", msg, want)
		}
	}
}

func TestAFailedFetchSaysWhyInItsTerminationLog(t *testing.T) {
	dir := t.TempDir()
	termLog := filepath.Join(dir, "termination-log")
	args := restore.FetchArgs{
		URL: "http://127.0.0.1:1/v1/backup/ns/c", Out: filepath.Join(dir, "b"), Size: 1, SHA256: strings.Repeat("0", 64),
		Timeout: 100 * time.Millisecond, TerminationLog: termLog,
	}.Args()
	if code := fetchBackup(context.Background(), args, os.Getenv, io.Discard); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if msg, _ := os.ReadFile(termLog); !strings.Contains(string(msg), "gave up after") {
		t.Errorf("termination message %q", msg)
	}
}

func TestFetchBackupReadsItsKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("q83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq80=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := readKey(good); err != nil || len(key) != 32 {
		t.Fatalf("%x, %v", key, err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readKey(bad); err == nil || !strings.Contains(err.Error(), "must hold 32 bytes") {
		t.Fatalf("a short key: %v", err)
	}
	log := filepath.Join(dir, "termination-log")
	code := fetchBackup(context.Background(), restore.FetchArgs{URL: "http://127.0.0.1:1/x", Out: filepath.Join(dir, "out"), Size: 1,
		SHA256: strings.Repeat("0", 64), Timeout: time.Second, TerminationLog: log, KeyFile: filepath.Join(dir, "missing")}.Args(), os.Getenv, io.Discard)
	msg, _ := os.ReadFile(log)
	if code != 1 || !strings.Contains(string(msg), "read the encryption key") {
		t.Fatalf("exit %d, termination log %q", code, msg)
	}
}

// The kubelet runs the seed's init containers again when it starts the pod in a
// new sandbox (after a node reboot, on a runtime that keeps no exited
// containers), long after the restore, when the EtcdRestore and its token Secret
// may be gone (their volumes then mount empty). Run as the pod runs them, on this
// machine's paths, both steps must find the data directory and succeed without
// asking the backup server or running the etcd tool.
func TestTheSeedStepsRunAgainAfterTheRestoreLeaveTheMemberAlone(t *testing.T) {
	var asked atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		http.NotFound(w, nil)
	}))
	defer server.Close()
	pod := restore.NewSeedPod(restore.SeedConfig{
		Cluster: &api.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"},
			Spec:       api.ClusterSpec{Size: 3, Version: "3.5.21"},
		},
		MemberName:   "c-0000",
		BackupURL:    server.URL + "/v1/backup/ns/c",
		Backup:       restore.VerifiedBackup{Size: 42, SHA256: strings.Repeat("f", 64), Encrypted: true},
		FetchImage:   "img",
		FetchTimeout: 5 * time.Second,
		KeySecret:    "key",
		TokenSecret:  "token",
	})

	// The pod's volumes, here: the member's data from the restore, an empty
	// backup volume (a new pod's emptyDir would not be; this one is harder),
	// and the Secrets' volumes empty, their Secrets gone.
	dir := t.TempDir()
	paths := strings.NewReplacer(
		"/var/etcd-restore-key", dir+"/key",
		"/var/etcd-restore", dir+"/backup",
		"/var/etcd", dir+"/etcd",
		"/var/run/secrets/etcd-restore", dir+"/token")
	for _, d := range []string{"etcd/data/member/snap", "backup", "key", "token"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "etcd/data/member/snap/db")
	if err := os.WriteFile(db, []byte("the member's data"), 0o600); err != nil {
		t.Fatal(err)
	}
	local := func(cmd []string) []string {
		out := make([]string, len(cmd))
		for i, a := range cmd {
			out[i] = paths.Replace(a)
		}
		return out
	}

	fetch, restoreStep := local(pod.Spec.InitContainers[1].Command), local(pod.Spec.InitContainers[2].Command)
	code, _, logs := runWith(t, append(fetch[1:], "--termination-log="+filepath.Join(dir, "termination-log")), nil)
	if code != 0 {
		t.Fatalf("fetch-backup run again exited %d:\n%s", code, logs)
	}
	if n := asked.Load(); n > 0 {
		t.Errorf("fetch-backup run again asked the backup server %d times", n)
	}
	if len(restoreStep) < 2 || restoreStep[1] != "restore-datadir" {
		t.Fatalf("the restore step %q does not run this binary, which alone can see that the restore is done: the etcd images have no shell", restoreStep)
	}
	if _, err := os.Stat(restoreStep[0]); err != nil {
		t.Errorf("fetch-backup left no copy of itself for the restore step: %v", err)
	}
	code, _, logs = runWith(t, restoreStep[1:], nil)
	if code != 0 {
		t.Fatalf("restore-datadir run again exited %d:\n%s", code, logs)
	}
	if got, err := os.ReadFile(db); err != nil || string(got) != "the member's data" {
		t.Errorf("the member's data is now %q (%v)", got, err)
	}
}
