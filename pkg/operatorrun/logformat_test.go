package operatorrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
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

// JSON lines carry their time to the millisecond (RFC 3339) and an error given
// with WithError in the field "error", not in the message.
func TestJSONLogsHaveMillisecondTimesAndErrorsInTheirOwnField(t *testing.T) {
	var buf bytes.Buffer
	log := logrus.New()
	log.SetOutput(&buf)
	format := DefaultLogFormat()
	if err := format.Set("json"); err != nil {
		t.Fatal(err)
	}
	ConfigureLogger(log.WithField("pkg", "etcd-operator"), DefaultLogLevel(), format)
	t.Cleanup(klog.ClearLogger)

	log.WithError(errors.New("etcdclusters is forbidden")).Error("controller stopped")

	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not JSON: %q (%v)", buf.String(), err)
	}
	ts, _ := line["time"].(string)
	if !millisecondRFC3339.MatchString(ts) {
		t.Errorf("time %q, want RFC 3339 with milliseconds", ts)
	}
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("time %q does not parse as RFC 3339: %v", ts, err)
	}
	if line["error"] != "etcdclusters is forbidden" || line["msg"] != "controller stopped" || line["level"] != "error" {
		t.Errorf("line %v, want the error in its own field and the message without it", line)
	}
}

var millisecondRFC3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`)

// The failures that end a process are logged with the error in its field, so a
// log pipeline finds why an operator restarted by searching one field.
func TestFailuresThatEndTheProcessLogTheErrorInItsField(t *testing.T) {
	t.Run("a process failing", func(t *testing.T) {
		log, hook := logtest.NewNullLogger()
		proc, _ := NewProcess(t.Context(), logrus.NewEntry(log))
		cause := errors.New("listen: address already in use")
		proc.Fail(cause)
		e := hook.LastEntry()
		if e == nil || e.Data[logrus.ErrorKey] != cause || strings.Contains(e.Message, cause.Error()) {
			t.Errorf("entry %+v, want the error in the field %q only", e, logrus.ErrorKey)
		}
	})
	t.Run("serving failing", func(t *testing.T) {
		log, hook := logtest.NewNullLogger()
		cause := errors.New("leader election: lost the lease")
		code := Run(t.Context(), "etcd-operator", func() (bool, error) { return false, nil },
			func(k string) string { return map[string]string{EnvPodNamespace: "ns", EnvPodName: "op-1"}[k] },
			io.Discard, logrus.NewEntry(log), func(context.Context, Identity) error { return cause })
		e := hook.LastEntry()
		if code != 1 || e == nil || e.Data[logrus.ErrorKey] != cause {
			t.Errorf("exit %d, entry %+v, want 1 and the error in the field %q", code, e, logrus.ErrorKey)
		}
	})
}
