package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/restore"
)

// The replay step of a restore to a point accepts exactly what the seed pod
// gives it.
func TestTheSeedPodRunsReplayArchiveWithArgumentsItAccepts(t *testing.T) {
	pod := restore.NewSeedPod(restore.SeedConfig{
		Cluster: &api.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"},
			Spec:       api.ClusterSpec{Size: 3, Version: "3.6.6"},
		},
		MemberName:   "c-0000",
		BackupURL:    "http://s/v1/backup/ns/c",
		ArchiveURL:   "http://s/v1/archive/ns/c",
		Backup:       restore.VerifiedBackup{Size: 42, SHA256: strings.Repeat("f", 64)},
		FetchImage:   "img",
		FetchTimeout: time.Minute,
		TokenSecret:  "t",
		Point: &restore.PointPlan{SnapshotRevision: 100, Revision: 180, ChunksSHA256: strings.Repeat("c", 64),
			Keys: 3, KeysSHA256: strings.Repeat("d", 64)},
	})
	var cmd []string
	for _, c := range pod.Spec.InitContainers {
		if c.Name == restore.ReplayContainerName {
			cmd = c.Command
		}
	}
	if len(cmd) < 2 || cmd[1] != restore.ReplaySubcommand {
		t.Fatalf("replay command %q", cmd)
	}
	a, err := parseReplayArchive(cmd[2:], io.Discard)
	if err == nil {
		err = a.Validate()
	}
	if err != nil {
		t.Fatalf("parsed %+v, %v", a, err)
	}
	again, err := parseReplayArchive(a.Args(), io.Discard)
	if err != nil || !reflect.DeepEqual(again, a) {
		t.Errorf("round trip of %+v gave %+v, %v", a, again, err)
	}
	if a.After != 100 || a.Revision != 180 || a.Keys != 3 || a.URL != "http://s/v1/archive/ns/c" || a.RevisionBump != restore.RevisionBump || a.TokenFile == "" {
		t.Errorf("parsed %+v", a)
	}
}

func TestReplayArchiveSaysWhyInItsTerminationLog(t *testing.T) {
	dir := t.TempDir()
	termLog := filepath.Join(dir, "termination-log")
	code := replayArchive(context.Background(), []string{"--termination-log=" + termLog, "--after=5", "--revision=3"}, os.Getenv, io.Discard)
	if code != 2 {
		t.Fatalf("bad arguments: exit %d, want 2", code)
	}
	if msg, _ := os.ReadFile(termLog); !strings.Contains(string(msg), "--revision after it") || !strings.Contains(string(msg), "must be hex sha256 digests") {
		t.Errorf("termination message %q", msg)
	}

	// Valid arguments, but restore-datadir left nothing to replay onto.
	a := restore.ReplayArgs{DataDir: filepath.Join(dir, "data"), ReplayDir: filepath.Join(dir, "data.replaying"), URL: "http://127.0.0.1:1/v1/archive/ns/c",
		Etcd: "/nonexistent/etcd", Name: "m", After: 1, Revision: 2, ChunksSHA256: strings.Repeat("0", 64), KeysSHA256: strings.Repeat("0", 64)}
	args := append(a.Args(), "--termination-log="+termLog)
	if code := replayArchive(context.Background(), args, os.Getenv, io.Discard); code != 1 {
		t.Fatalf("nothing to replay onto: exit %d, want 1", code)
	}
	if msg, _ := os.ReadFile(termLog); !strings.Contains(string(msg), "data.replaying, where restore-datadir should have restored the snapshot, is missing") {
		t.Errorf("termination message %q", msg)
	}
}
