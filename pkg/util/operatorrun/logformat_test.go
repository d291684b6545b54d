package operatorrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

func TestLogFormatFlagAcceptsTextAndJSONOnly(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{{"text", false}, {"json", false}, {"JSON", true}, {"xml", true}, {"", true}} {
		f := DefaultLogFormat()
		err := f.Set(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("Set(%q) = %v", tc.in, err)
		}
		if err == nil && f.String() != tc.in {
			t.Errorf("Set(%q) then String() = %q", tc.in, f.String())
		}
	}
}

// client-go logs through klog; with -log-format=json its lines must be JSON
// with fields too, not klog's own text on stderr.
func TestKlogIsRoutedThroughLogrusAsJSON(t *testing.T) {
	var buf bytes.Buffer
	log := logrus.New()
	log.SetOutput(&buf)
	format := DefaultLogFormat()
	if err := format.Set("json"); err != nil {
		t.Fatal(err)
	}
	level := DefaultLogLevel()
	ConfigureLogger(log.WithField("pkg", "etcd-operator"), level, format)
	t.Cleanup(klog.ClearLogger)

	klog.InfoS("lease acquired", "lock", "etcd-system/etcd-operator")
	klog.ErrorS(errors.New("connection refused"), "watch failed", "resource", "pods")
	klog.V(4).InfoS("too detailed for info")
	klog.Flush()

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q (%v)", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want the info and the error (V(4) is below info):\n%s", len(lines), buf.String())
	}
	if l := lines[0]; l["msg"] != "lease acquired" || l["level"] != "info" || l["lock"] != "etcd-system/etcd-operator" || l["pkg"] != "client-go" {
		t.Errorf("info line %v", l)
	}
	if l := lines[1]; l["msg"] != "watch failed" || l["level"] != "error" || l["error"] != "connection refused" || l["resource"] != "pods" {
		t.Errorf("error line %v", l)
	}
}
