package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		command    string
		positional []string
		check      func(options) bool
		err        string
	}{
		{"flags after the arguments, as kubectl users write them", []string{"status", "example", "-n", "team-a"}, "status", []string{"example"},
			func(o options) bool { return o.namespace == "team-a" }, ""},
		{"flags before the command", []string{"--namespace=team-b", "defrag", "example", "--member", "example-abc"}, "defrag", []string{"example"},
			func(o options) bool { return o.namespace == "team-b" && o.member == "example-abc" }, ""},
		{"snapshot output and TLS files", []string{"snapshot", "example", "-o", "/tmp/s.db", "--cert", "c", "--key", "k", "--cacert", "ca"}, "snapshot", []string{"example"},
			func(o options) bool {
				return o.output == "/tmp/s.db" && o.cert == "c" && o.key == "k" && o.cacert == "ca"
			}, ""},
		{"no command shows the usage", nil, "", nil, nil, "no command given"},
		{"an unknown flag is an error", []string{"status", "example", "--colour"}, "", nil, nil, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			o, command, positional, err := parseArgs(tt.args, &stderr)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || command != tt.command || !reflect.DeepEqual(positional, tt.positional) || !tt.check(o) {
				t.Fatalf("parseArgs = %+v, %q, %q, %v", o, command, positional, err)
			}
		})
	}
}

func TestRunRefusesBadUse(t *testing.T) {
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"a command without a cluster name", []string{"status"}, "takes one argument"},
		{"two cluster names", []string{"compact", "a", "b"}, "takes one argument"},
		{"a kubeconfig that does not exist", []string{"status", "a", "--kubeconfig", "/nonexistent"}, "kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("run = %v, want an error containing %q", err, tt.err)
			}
		})
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &errOut); err != nil && !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help = %v", err)
	}
	if !strings.Contains(errOut.String(), "kubectl etcd status CLUSTER") {
		t.Errorf("--help printed %q", errOut.String())
	}
}

func TestTLSFromFilesNamesWhatIsMissing(t *testing.T) {
	if _, err := tlsFromFiles("c.pem", "", "ca.pem"); err == nil || !strings.Contains(err.Error(), "--key is needed") {
		t.Fatalf("tlsFromFiles without a key = %v", err)
	}
	if _, err := tlsFromFiles("/nonexistent/c.pem", "k", "ca"); err == nil || !strings.Contains(err.Error(), "--cert") {
		t.Fatalf("tlsFromFiles of a missing file = %v", err)
	}
}
