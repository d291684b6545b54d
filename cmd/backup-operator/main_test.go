package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(options) bool
		wantErr string
	}{
		{name: "defaults", check: func(o options) bool {
			return o.createCRD && !o.clusterWide && o.listenAddr == "0.0.0.0:8081" && o.kubeconfig == "" &&
				!o.printVersion && o.workers == 4 && o.maxConcurrentBackups == 2 &&
				!o.cloudIdentity.LendsTo("default") && o.cloudIdentity.Operator == "etcd-backup-operator"
		}},
		{name: "JSON logs", args: []string{"-log-format=json"}, check: func(o options) bool { return o.logFormat.String() == "json" }},
		{name: "an unknown log format is refused", args: []string{"-log-format=xml"}, wantErr: "unknown log format"},
		{name: "double dashes work like single ones", args: []string{"--create-crd=false", "--cluster-wide", "--listen-addr=127.0.0.1:9000"},
			check: func(o options) bool { return !o.createCRD && o.clusterWide && o.listenAddr == "127.0.0.1:9000" }},
		{name: "kubeconfig and workers", args: []string{"-kubeconfig", "/k", "-workers=8", "-max-concurrent-backups=3"},
			check: func(o options) bool { return o.kubeconfig == "/k" && o.workers == 8 && o.maxConcurrentBackups == 3 }},
		{name: "zero workers are refused", args: []string{"-workers=0"}, wantErr: "-workers must be between 1 and 64"},
		{name: "no backup slots are refused", args: []string{"-max-concurrent-backups=0"}, wantErr: "-max-concurrent-backups must be at least 1"},
		{name: "a bad boolean is refused", args: []string{"-create-crd=maybe"}, wantErr: "invalid boolean value"},
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
	if code != 0 || !strings.Contains(out, "etcd-backup-operator Version:") || !strings.Contains(out, "Go Version:") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

func TestHelpExitsZero(t *testing.T) {
	code, _, logs := runWith(t, []string{"-h"}, nil)
	if code != 0 || !strings.Contains(logs, "-cluster-wide") {
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

// The example Deployment must start the binary as written, and probe the port it
// listens on.
func TestExampleDeploymentMatchesTheFlags(t *testing.T) {
	data, err := os.ReadFile("../../example/etcd-backup-operator/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatal(err)
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
	if len(c.Ports) != 1 || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
		t.Fatalf("container ports %+v, but the binary listens on %s", c.Ports, o.listenAddr)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != c.Ports[0].Name {
		t.Fatalf("readiness probe %+v", p)
	}
}
