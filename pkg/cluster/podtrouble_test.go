package cluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"time"
)

// Ends of etcd's log as the kubelet keeps them in a termination message,
// captured from the etcd releases the unit tests build (hack/etcd-binaries.sh)
// and shortened in the middle of their stack traces.
const (
	// ETCD_LOG_LEVEL=bogus on etcd 3.5.21; 3.6.6 and 3.7.3 print the same.
	logLevelPanic35 = `{"level":"info","ts":"2026-11-28T20:05:37.299823Z","caller":"flags/flag.go:113","msg":"recognized and used environment variable","variable-name":"ETCD_LOG_LEVEL","variable-value":"bogus"}
panic: unrecognized level: "bogus"

goroutine 1 [running]:
go.etcd.io/etcd/client/pkg/v3/logutil.ConvertToZapLevel({0x1979c602000f?, 0x0?})
	go.etcd.io/etcd/client/pkg/v3@v3.5.21/logutil/log_level.go:27 +0x51
go.etcd.io/etcd/server/v3/embed.(*Config).setupLogging(0x1979c607bc08)
	go.etcd.io/etcd/server/v3@v3.5.21/embed/config_logging.go:108 +0xbe5
go.etcd.io/etcd/server/v3/etcdmain.Main({0x1979c60927b0, 0x3, 0x3})
	go.etcd.io/etcd/server/v3@v3.5.21/etcdmain/main.go:40 +0x105
main.main()
	go.etcd.io/etcd/server/v3@v3.5.21/main.go:31 +0x28
`
	// ETCD_LOG_LEVEL=bogus on etcd 3.4.23, which logs with capnslog.
	logLevelPanic34 = `2026-11-28 20:05:37.257271 I | pkg/flags: recognized and used environment variable ETCD_LOG_LEVEL=bogus
[WARNING] Deprecated '--logger=capnslog' flag is set; use '--logger=zap' flag instead
panic: unknown level "bogus"

goroutine 1 [running]:
go.etcd.io/etcd/pkg/logutil.ConvertToCapnslogLogLevel({0xc00004400f?, 0x5})
	go.etcd.io/etcd/pkg/logutil/log_level.go:68 +0x185
main.main()
	go.etcd.io/etcd/main.go:28 +0x17
`
	// --bogus-flag=1 on etcd 3.7.3 (3.4 to 3.6 print a shorter usage text).
	unknownFlag37 = `flag provided but not defined: -bogus-flag
Usage:

  etcd [flags]
    Start an etcd server.

  etcd --version
    Show the version of etcd.

  etcd -h | --help
    Show the help information about etcd.

  etcd --config-file
    Path to the server configuration file. Note that if a configuration file is provided, other command line flags and environment variables will be ignored.
    Duration-typed fields (for example --heartbeat-interval, --election-timeout,
    --watch-progress-notify-interval) must be specified as integer nanoseconds
    in the JSON/YAML file (e.g. 600000000000 for 10m); human-readable strings
    such as "10m" are only accepted on the command line.

  etcd gateway
    Run the stateless pass-through etcd TCP connection forwarding proxy.

  etcd grpc-proxy
    Run the stateless etcd v3 gRPC L7 reverse proxy.

`
	// --listen-client-urls=bogus on etcd 3.6.6.
	badFlagValue36 = `invalid value "bogus" for flag -listen-client-urls: URL scheme must be http, https, unix, or unixs: bogus
Usage:

  etcd [flags]
    Start an etcd server.

  etcd gateway
    Run the stateless pass-through etcd TCP connection forwarding proxy.

  etcd grpc-proxy
    Run the stateless etcd v3 gRPC L7 reverse proxy.

`
	// ETCD_SNAPSHOT_COUNT=abc on etcd 3.6.6: a warning, then exit code 1.
	badEnv36 = `{"level":"info","ts":"2026-11-28T20:05:46.272996Z","caller":"etcdmain/etcd.go:64","msg":"Running: ","args":["/usr/local/bin/etcd","--data-dir","/var/etcd/data"]}
{"level":"warn","ts":"2026-11-28T20:05:46.273085Z","caller":"etcdmain/etcd.go:66","msg":"failed to verify flags","error":"invalid value \"abc\" for ETCD_SNAPSHOT_COUNT: parse error"}
`
	// ETCD_SNAPSHOT_COUNT=abc on etcd 3.4.23.
	badEnv34 = `2026-11-28 20:08:41.557082 E | etcdmain: error verifying flags, invalid value "abc" for ETCD_SNAPSHOT_COUNT: parse error. See 'etcd --help'.
`
	// --name a with --initial-cluster b=... on etcd 3.6.6: an error line,
	// then the fatal one, each with its own stack trace; the message starts
	// in the middle of a line.
	initialClusterFatal36 = `tcd/server/v3/embed.StartEtcd\n\tgo.etcd.io/etcd/server/v3@v3.6.6/embed/etcd.go:262\ngo.etcd.io/etcd/server/v3/etcdmain.Main\n\tgo.etcd.io/etcd/server/v3@v3.6.6/etcdmain/main.go:40\nmain.main\n\tgo.etcd.io/etcd/server/v3@v3.6.6/main.go:31\nruntime.main\n\truntime/proc.go:290"}
{"level":"info","ts":"2026-11-28T20:05:46.318745Z","caller":"embed/etcd.go:426","msg":"closing etcd server","name":"a","data-dir":"/tmp/trouble-cap/x","advertise-peer-urls":["http://127.0.0.1:23801"],"advertise-client-urls":["http://localhost:2379"]}
{"level":"info","ts":"2026-11-28T20:05:46.318807Z","caller":"embed/etcd.go:428","msg":"closed etcd server","name":"a","data-dir":"/tmp/trouble-cap/x","advertise-peer-urls":["http://127.0.0.1:23801"],"advertise-client-urls":["http://localhost:2379"]}
{"level":"fatal","ts":"2026-11-28T20:05:46.318836Z","caller":"etcdmain/etcd.go:183","msg":"discovery failed","error":"couldn't find local name \"a\" in the initial cluster configuration","stacktrace":"go.etcd.io/etcd/server/v3/etcdmain.startEtcdOrProxyV2\n\tgo.etcd.io/etcd/server/v3@v3.6.6/etcdmain/etcd.go:183\ngo.etcd.io/etcd/server/v3/etcdmain.Main\n\tgo.etcd.io/etcd/server/v3@v3.6.6/etcdmain/main.go:40\nmain.main\n\tgo.etcd.io/etcd/server/v3@v3.6.6/main.go:31\nruntime.main\n\truntime/proc.go:290"}
`
	// The same on etcd 3.4.23 (capnslog).
	initialClusterFatal34 = `2026-11-28 20:08:41.543279 I | embed: snapshot count = 100000
2026-11-28 20:08:41.543283 I | embed: advertise client URLs = http://localhost:2379
2026-11-28 20:08:41.544686 C | etcdmain: couldn't find local name "a" in the initial cluster configuration
`
)

func TestEtcdStopReason(t *testing.T) {
	cases := []struct {
		name, log, want string
	}{
		{"an ETCD_LOG_LEVEL etcd does not know is the panic line, not the goroutine dump", logLevelPanic35, `panic: unrecognized level: "bogus"`},
		{"an ETCD_LOG_LEVEL etcd 3.4 does not know is its panic line", logLevelPanic34, `panic: unknown level "bogus"`},
		{"a flag etcd does not know is the line before its usage text", unknownFlag37, "flag provided but not defined: -bogus-flag"},
		{"a flag value etcd refuses is the line before its usage text", badFlagValue36, `invalid value "bogus" for flag -listen-client-urls: URL scheme must be http, https, unix, or unixs: bogus`},
		{"an ETCD_* variable etcd cannot parse is its warning with the error", badEnv36, `failed to verify flags: invalid value "abc" for ETCD_SNAPSHOT_COUNT: parse error`},
		{"an ETCD_* variable etcd 3.4 cannot parse is its error line, without the time", badEnv34, `etcdmain: error verifying flags, invalid value "abc" for ETCD_SNAPSHOT_COUNT: parse error. See 'etcd --help'.`},
		{"a fatal line wins over the error line before it, without its stack trace", initialClusterFatal36, `discovery failed: couldn't find local name "a" in the initial cluster configuration`},
		{"a capnslog critical line is the fatal one", initialClusterFatal34, `etcdmain: couldn't find local name "a" in the initial cluster configuration`},
		{"a log that says nothing of a failure gives nothing", `{"level":"info","ts":"2026-11-28T20:05:46.318745Z","msg":"closing etcd server"}`, ""},
		{"an empty message gives nothing", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := etcdStopReason(tc.log); got != tc.want {
				t.Errorf("etcdStopReason = %q, want %q", got, tc.want)
			}
		})
	}
}

// crashLoopingWith makes the pod's etcd wait to be restarted after it ended
// with exit code 2 and msg as the end of its log.
func crashLoopingWith(restarts int32, msg string) podOpt {
	return func(p *corev1.Pod) {
		crashLooping(restarts)(p)
		p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: msg}}
	}
}

// replacedForImage makes the pod's etcd container one the kubelet stopped
// (cleanly, exit code 0) to start the image the pod was patched to, and now
// waits as reason says: the kubelet's crash back-off (CrashLoopBackOff)
// alternates with the image's pull back-off between its tries to pull it.
func replacedForImage(reason, message string) podOpt {
	return func(p *corev1.Pod) {
		notReady(p)
		cs := &p.Status.ContainerStatuses[0]
		cs.Ready = false
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	}
}

func TestPodTrouble(t *testing.T) {
	cases := []struct {
		name string
		// domain is the cluster's spec.pod.ClusterDomain.
		domain string
		opts   []podOpt
		// want is in the text, cause is the whole cause.
		want, cause string
	}{
		{name: "an etcd that exits at start at every restart says etcd's own words, and one cause for every restart",
			opts:  []podOpt{crashLoopingWith(3, logLevelPanic35)},
			want:  `has its container etcd keeps failing (3 restarts): exit code 2 (Error): panic: unrecognized level: "bogus"`,
			cause: "container etcd keeps failing: exit code 2 (Error)"},
		{name: "an etcd that ended on a flag it does not know names the flag",
			opts:  []podOpt{exitedWith(unknownFlag37)},
			want:  "has its container etcd ended: exit code 2 (Error): flag provided but not defined: -bogus-flag",
			cause: "container etcd ended: exit code 2 (Error)"},
		{name: "an etcd whose log says nothing of why it ended shows the end of its log",
			opts:  []podOpt{exitedWith("some last words")},
			want:  "ended: exit code 2 (Error): some last words",
			cause: "container etcd ended: exit code 2 (Error)"},
		{name: "a member patched to an image that cannot be pulled waits for that image, not for a clean exit, while the kubelet backs off",
			opts:  []podOpt{onVersion("3.5.99"), runs(testVersion), replacedForImage("CrashLoopBackOff", "back-off 10s restarting failed container=etcd pod=example-a_ns(pod-uid-example-a)")},
			want:  "has its container etcd is waiting to start on image quay.io/coreos/etcd:v3.5.99, which has not run yet",
			cause: "container etcd waits for its image quay.io/coreos/etcd:v3.5.99"},
		{name: "a member patched to an image that cannot be pulled names the pull failure when the kubelet shows it, with the same cause",
			opts:  []podOpt{onVersion("3.5.99"), runs(testVersion), replacedForImage("ImagePullBackOff", `Back-off pulling image "quay.io/coreos/etcd:v3.5.99"`)},
			want:  `has its container etcd is waiting: ImagePullBackOff: Back-off pulling image "quay.io/coreos/etcd:v3.5.99"`,
			cause: "container etcd waits for its image quay.io/coreos/etcd:v3.5.99"},
		{name: "an image that cannot be pulled at the first try has the same cause as its back-off",
			opts:  []podOpt{onVersion("3.5.99"), runs(testVersion), replacedForImage("ErrImagePull", "rpc error: code = NotFound desc = failed to pull and unpack image")},
			want:  "is waiting: ErrImagePull: rpc error",
			cause: "container etcd waits for its image quay.io/coreos/etcd:v3.5.99"},
		{name: "an etcd stopped cleanly again and again on its own image is said to be stopped, not to fail with exit code 0",
			opts:  []podOpt{replacedForImage("CrashLoopBackOff", "back-off 40s restarting failed container"), restarted(4)},
			want:  "has its container etcd keeps being stopped (4 restarts): it ended cleanly (exit code 0)",
			cause: "container etcd keeps being stopped"},
		{name: "a member whose DNS name does not resolve for longer than the negative cache of cluster DNS names it and the cluster domain to check",
			domain: ".cluster.locl", opts: []podOpt{resolvingFor(50 * time.Second)},
			want:  "waits for its DNS name example-a.example.ns.svc.cluster.locl to resolve (its init container check-dns has looked it up for more than 45s): check spec.pod.ClusterDomain",
			cause: "waits for its DNS name to resolve"},
		{name: "a member whose DNS name does not resolve yet is not trouble while the first answer may be cached",
			domain: ".cluster.locl", opts: []podOpt{resolvingFor(20 * time.Second)}},
		{name: "a member whose check-dns found its name after it gave up once has no DNS trouble",
			domain: ".cluster.locl", opts: []podOpt{gaveUpOnDNS, func(p *corev1.Pod) {
				p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
			}}},
		{name: "a member whose check-dns gave up on its name and runs again names it at once",
			domain: ".cluster.locl", opts: []podOpt{gaveUpOnDNS},
			want:  "waits for its DNS name example-a.example.ns.svc.cluster.locl to resolve",
			cause: "waits for its DNS name to resolve"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := newTestCluster(withClusterDomain(tc.domain))
			m := memberTemplate(cl)
			m.Name = memberA
			pod := memberPod(cl, &m, testStart.Add(-time.Hour), tc.opts...)
			text, cause := podTroubleCause(pod, nil, testStart)
			if tc.want == "" && text != "" || !strings.Contains(text, tc.want) {
				t.Errorf("text = %q, want it to contain %q", text, tc.want)
			}
			if cause != tc.cause {
				t.Errorf("cause = %q, want %q", cause, tc.cause)
			}
			if strings.Contains(text, "goroutine") {
				t.Errorf("text = %q shows the stack trace", text)
			}
			if strings.Contains(text, "exit code 0 (Completed)") {
				t.Errorf("text = %q gives a clean exit as the cause", text)
			}
		})
	}
}
