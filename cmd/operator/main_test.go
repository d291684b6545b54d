package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(options) bool
		wantErr string
	}{
		{name: "defaults are the original's", args: nil, check: func(o options) bool {
			return o.listenAddr == "0.0.0.0:8080" && o.createCRD && !o.clusterWide && o.chaosLevel == -1 &&
				o.gcInterval == 10*time.Minute && o.reconcileInterval == 8*time.Second && o.pendingTimeout == 5*time.Minute &&
				o.logLevel.Level == logrus.InfoLevel && o.joinImage == "" && !o.profiling
		}},
		{name: "debug logs", args: []string{"-log-level=debug"}, check: func(o options) bool { return o.logLevel.Level == logrus.DebugLevel }},
		{name: "a join image", args: []string{"-join-image=reg/op:1"}, check: func(o options) bool { return o.joinImage == "reg/op:1" }},
		{name: "profiles served on request", args: []string{"--profiling"}, check: func(o options) bool { return o.profiling }},
		{name: "an unknown log level is refused", args: []string{"-log-level=trace"}, wantErr: "unknown log level"},
		{name: "JSON logs", args: []string{"-log-format=json"}, check: func(o options) bool { return o.logFormat.String() == "json" }},
		{name: "an unknown log format is refused", args: []string{"-log-format=xml"}, wantErr: "unknown log format"},
		{name: "double dashes work like single ones", args: []string{"--create-crd=false", "--cluster-wide"}, check: func(o options) bool {
			return !o.createCRD && o.clusterWide
		}},
		{name: "gc-interval is accepted", args: []string{"-gc-interval=1m"}, check: func(o options) bool { return o.gcInterval == time.Minute }},
		{name: "chaos level 2", args: []string{"-chaos-level=2"}, check: func(o options) bool { return o.chaosLevel == 2 }},
		{name: "chaos level 3 is refused", args: []string{"-chaos-level=3"}, wantErr: "-chaos-level must be -1 (off), 1 or 2"},
		{name: "a zero reconcile interval is refused", args: []string{"-reconcile-interval=0s"}, wantErr: "-reconcile-interval must be positive"},
		{name: "a bad duration is refused", args: []string{"-pending-timeout=soon"}, wantErr: "invalid value"},
		{name: "an unknown flag is refused", args: []string{"-size=3"}, wantErr: "flag provided but not defined"},
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

func TestRunFailsClearlyWithoutDownwardAPIEnv(t *testing.T) {
	env := map[string]string{}
	if code := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard, quietLog()); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
}

func TestVersionFlagExitsZero(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"-version"}, func(string) string { return "" }, &out, quietLog()); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if !strings.Contains(out.String(), "etcd-operator Version:") {
		t.Fatalf("-version printed %q", out.String())
	}
}

func TestBadFlagsExitTwo(t *testing.T) {
	if code := run(context.Background(), []string{"-chaos-level=7"}, func(string) string { return "" }, io.Discard, quietLog()); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}
