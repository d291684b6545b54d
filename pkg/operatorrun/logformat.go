package operatorrun

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// LogFormat is the -log-format flag of the three binaries: text for people,
// json for log pipelines that parse fields (Loki, Elasticsearch).
type LogFormat struct {
	name string
}

// LogFormatUsage is the flag's help text.
const LogFormatUsage = "log format: text or json"

// DefaultLogFormat is text, the format the original logged in.
func DefaultLogFormat() LogFormat { return LogFormat{name: "text"} }

func (f *LogFormat) String() string {
	if f.name == "" {
		return "text"
	}
	return f.name
}

// Set accepts text and json.
func (f *LogFormat) Set(s string) error {
	switch s {
	case "text", "json":
		f.name = s
		return nil
	}
	return fmt.Errorf("unknown log format %q (want text or json)", s)
}

// TimestampFormat is RFC 3339 with milliseconds: a reconcile pass, a leader
// election or a member's restart take well under a second per step, and lines
// with whole seconds cannot be ordered against etcd's own logs.
const TimestampFormat = "2006-01-02T15:04:05.000Z07:00"

// Formatter is the logrus formatter of the format. In JSON an error given with
// WithError is the field "error", apart from the message, so that a pipeline
// can search and group on it.
func (f LogFormat) Formatter() logrus.Formatter {
	if f.name == "json" {
		return &logrus.JSONFormatter{TimestampFormat: TimestampFormat}
	}
	return &logrus.TextFormatter{FullTimestamp: true}
}

// ConfigureLogger applies the -log-level and -log-format flags to log's logger
// and routes client-go's klog output (leader election, reflector and event
// broadcaster messages) through it, so that one process writes one format: a
// JSON pipeline would otherwise choke on klog's own header lines on stderr.
// klog's logger is process-wide, which is why only the binaries call this.
func ConfigureLogger(log *logrus.Entry, level LogLevel, format LogFormat) {
	log.Logger.SetLevel(level.Level)
	log.Logger.SetFormatter(format.Formatter())
	klog.SetLogger(logr.New(&klogSink{log: log.WithField("pkg", "client-go")}))
}

// klogSink is a logr.LogSink writing to logrus. klog checks its own verbosity
// (-v, 0 here) before calling Info; what passes is logrus Info at V(0) and
// Debug above, so -log-level=debug shows client-go's details.
type klogSink struct {
	log  *logrus.Entry
	name string
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(level int) bool {
	if level > 0 {
		return s.log.Logger.IsLevelEnabled(logrus.DebugLevel)
	}
	return s.log.Logger.IsLevelEnabled(logrus.InfoLevel)
}

func (s *klogSink) Info(level int, msg string, kv ...any) {
	e := s.entry(kv)
	if level > 0 {
		e.Debug(msg)
		return
	}
	e.Info(msg)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	e := s.entry(kv)
	if err != nil {
		e = e.WithError(err)
	}
	e.Error(msg)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{log: s.entry(kv), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &klogSink{log: s.log.WithField("logger", name), name: name}
}

// entry adds logr's alternating keys and values as fields; a key without a
// value gets "(MISSING)", as logr's own sinks do.
func (s *klogSink) entry(kv []any) *logrus.Entry {
	if len(kv) == 0 {
		return s.log
	}
	fields := make(logrus.Fields, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		key := fmt.Sprint(kv[i])
		var v any = "(MISSING)"
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		fields[key] = v
	}
	return s.log.WithFields(fields)
}
