package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/openetcd/etcd-operator/pkg/restore"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(options) bool
		wantErr string
	}{
		{name: "defaults", check: func(o options) bool {
			return o.createCRD && !o.clusterWide && o.listenAddr == "0.0.0.0:8082" && o.kubeconfig == "" &&
				!o.printVersion && o.workers == 4 && o.fetchImage == "" && o.restoreTimeout == 20*time.Minute &&
				!o.cloudIdentity.LendsTo("default") && o.cloudIdentity.Operator == "etcd-restore-operator"
		}},
		{name: "JSON logs", args: []string{"-log-format=json"}, check: func(o options) bool { return o.logFormat.String() == "json" }},
		{name: "an unknown log format is refused", args: []string{"-log-format=xml"}, wantErr: "unknown log format"},
		{name: "double dashes work like single ones", args: []string{"--create-crd=false", "--cluster-wide", "--listen-addr=127.0.0.1:9000"},
			check: func(o options) bool { return !o.createCRD && o.clusterWide && o.listenAddr == "127.0.0.1:9000" }},
		{name: "kubeconfig, fetch image and timeout", args: []string{"-kubeconfig", "/k", "-fetch-image=reg/op:1", "-restore-timeout=45m", "-workers=2"},
			check: func(o options) bool {
				return o.kubeconfig == "/k" && o.fetchImage == "reg/op:1" && o.restoreTimeout == 45*time.Minute && o.workers == 2
			}},
		{name: "zero workers are refused", args: []string{"-workers=0"}, wantErr: "-workers must be between 1 and 64"},
		{name: "a tiny timeout is refused", args: []string{"-restore-timeout=5s"}, wantErr: "-restore-timeout must be at least 1m"},
		{name: "a bad boolean is refused", args: []string{"-cluster-wide=maybe"}, wantErr: "invalid boolean value"},
		{name: "an unknown flag is refused", args: []string{"-chaos-level=1"}, wantErr: "flag provided but not defined"},
		{name: "the cloud identity lent to two namespaces", args: []string{"--cloud-identity-namespaces=team-a,team-b"},
			check: func(o options) bool { return o.cloudIdentity.String() == "team-a,team-b" }},
		{name: "stray arguments are refused", args: []string{"extra"}, wantErr: "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Fatalf("unexpected options %+v", o)
			}
		})
	}
}

// runWith runs the binary's logic with the given arguments and environment and
// returns its exit code, stdout and log.
func runWith(t *testing.T, args []string, env map[string]string) (int, string, string) {
	t.Helper()
	var stdout, logs bytes.Buffer
	l := logrus.New()
	l.SetOutput(&logs)
	code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, logrus.NewEntry(l))
	return code, stdout.String(), logs.String()
}

func TestVersionNeedsNoEnvironment(t *testing.T) {
	code, out, _ := runWith(t, []string{"-version"}, nil)
	if code != 0 || !strings.Contains(out, "etcd-restore-operator Version:") || !strings.Contains(out, "Go Version:") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

func TestHelpExitsZero(t *testing.T) {
	code, _, logs := runWith(t, []string{"-h"}, nil)
	if code != 0 || !strings.Contains(logs, "-cluster-wide") || !strings.Contains(logs, "-fetch-image") {
		t.Fatalf("exit %d, output %q", code, logs)
	}
}

func TestBadFlagsExitTwo(t *testing.T) {
	if code, _, _ := runWith(t, []string{"-workers=-1"}, nil); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}

func TestMissingDownwardAPIEnvironmentIsExplained(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{nil, []string{"MY_POD_NAMESPACE is not set", "MY_POD_NAME is not set", "downward API"}},
		{map[string]string{"MY_POD_NAMESPACE": "ops"}, []string{"MY_POD_NAME is not set"}},
		{map[string]string{"MY_POD_NAME": "op-1"}, []string{"MY_POD_NAMESPACE is not set"}},
	}
	for _, tc := range tests {
		code, _, logs := runWith(t, nil, tc.env)
		if code != 1 {
			t.Errorf("env %v: exit %d, want 1", tc.env, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(logs, w) {
				t.Errorf("env %v: log %q does not say %q", tc.env, logs, w)
			}
		}
	}
}

func TestUnreadableKubeconfigIsAnError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	code, _, logs := runWith(t, []string{"-kubeconfig", missing}, map[string]string{"MY_POD_NAMESPACE": "ops", "MY_POD_NAME": "op-1"})
	if code != 1 || !strings.Contains(logs, "no-such-kubeconfig") {
		t.Fatalf("exit %d, log %q", code, logs)
	}
}

// The seed pod runs `etcd-restore-operator fetch-backup ...`: the same binary must
// take that subcommand, needing neither the operator's flags nor its environment.
func TestFetchBackupSubcommand(t *testing.T) {
	data := []byte("a backup, as far as this test is concerned")
	sum := sha256.Sum256(data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer srv.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "latest.backup")
	args := []string{restore.FetchSubcommand, "--url=" + srv.URL, "--out=" + out, "--size=" + strconv.Itoa(len(data)),
		"--sha256=" + hex.EncodeToString(sum[:]), "--termination-log=" + filepath.Join(dir, "term")}
	if code, _, logs := runWith(t, args, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, logs)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("the fetched file differs")
	}

	args[4] = "--sha256=" + strings.Repeat("0", 64)
	if code, _, _ := runWith(t, args, nil); code != 1 {
		t.Fatalf("exit %d for a checksum mismatch, want 1", code)
	}
	if msg, _ := os.ReadFile(filepath.Join(dir, "term")); !strings.Contains(string(msg), "sha256") {
		t.Errorf("termination message %q", msg)
	}
}

// The example Deployment must start the binary as written, probe the port it
// listens on, and expose the backup server's port.
func TestExampleDeploymentMatchesTheFlags(t *testing.T) {
	data, err := os.ReadFile("../../example/etcd-restore-operator/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Labels["name"] != binary || d.Spec.Template.Labels["name"] != binary || d.Spec.Selector.MatchLabels["name"] != binary {
		t.Errorf("the Deployment and its pods must carry name: %s (the Service selects the pods by their labels)", binary)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Command) == 0 || c.Command[0] != binary {
		t.Fatalf("command %v does not run %s", c.Command, binary)
	}
	o, err := parseFlags(c.Command[1:], io.Discard)
	if err != nil {
		t.Fatalf("the binary refuses the example's flags: %v", err)
	}
	_, port, err := net.SplitHostPort(o.listenAddr)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if strconv.Itoa(int(ports["http"])) != port || ports["backup"] != restore.BackupServerPort {
		t.Fatalf("container ports %+v, but the binary listens on %s and serves backups on %d", c.Ports, o.listenAddr, restore.BackupServerPort)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "http" {
		t.Fatalf("readiness probe %+v: a rolling update waits for the new pod to pass /readyz", p)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["MY_POD_NAMESPACE"] != "metadata.namespace" || env["MY_POD_NAME"] != "metadata.name" {
		t.Errorf("downward API env %v", env)
	}
	if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the operator must run as non-root")
	}
}
