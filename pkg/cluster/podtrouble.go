package cluster

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// podTrouble says why a pod does not run, from what its status and its claim
// show: the scheduler's message, a claim that is not bound, a container that
// waits for something that will not come by itself (an image that cannot be
// pulled, a configuration error), keeps failing, or ended. It reads as the
// rest of a sentence starting with the pod ("pod x cannot be scheduled:
// ..."); "" when the pod shows nothing wrong. now is the time the pod's
// status is read at, for waits that are trouble only once they last.
func podTrouble(pod *corev1.Pod, claim *corev1.PersistentVolumeClaim, now time.Time) string {
	text, _ := podTroubleCause(pod, claim, now)
	return text
}

// podTroubleCause is podTrouble with its cause: the part that stays the same
// when the same thing goes wrong again, in another pod or after another
// restart (no pod names, back-off times or log lines), so that it is
// reported once and a replacement for it is not made in a loop.
func podTroubleCause(pod *corev1.Pod, claim *corev1.PersistentVolumeClaim, now time.Time) (text, cause string) {
	if pod.Status.Reason != "" && pod.Status.Phase == corev1.PodFailed {
		// Evicted, NodeLost, OutOfpods and the like.
		return fmt.Sprintf("failed: %s: %s", pod.Status.Reason, pod.Status.Message), "failed: " + pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			text := "cannot be scheduled: " + c.Message
			return text, text
		}
	}
	if claim != nil && claim.Status.Phase == corev1.ClaimPending {
		text := fmt.Sprintf("waits for its PersistentVolumeClaim %s, which is Pending (no volume bound: check its storage class and provisioner)", claim.Name)
		return text, "waits for its PersistentVolumeClaim, which is Pending"
	}
	if text, cause := dnsTrouble(pod, now); text != "" {
		return text, cause
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, st := range statuses {
			if text, cause := containerTrouble(st, specImage(pod, st.Name)); text != "" {
				return "has its container " + st.Name + " " + text, "container " + st.Name + " " + cause
			}
		}
	}
	return "", ""
}

// dnsWaitBound is how long the check-dns init container may look up the
// member's DNS name before the wait is reported. A new member's name resolves
// once the endpoints controller publishes the pod, but the first "no such
// name" stays cached for the zone's negative TTL; a name that still does not
// resolve after that will not by itself (a wrong spec.pod.ClusterDomain, a
// pod that cannot reach the cluster's DNS), while the pending timeout that
// replaces the pod is minutes away.
const dnsWaitBound = 45 * time.Second

// dnsTrouble reports a pod whose check-dns init container has looked up the
// member's DNS name for longer than dnsWaitBound, or gave up on it (with
// spec.pod.DNSTimeoutInSecond) and is run again.
func dnsTrouble(pod *corev1.Pod, now time.Time) (text, cause string) {
	var st *corev1.ContainerStatus
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == k8sutil.DNSCheckContainerName {
			st = &pod.Status.InitContainerStatuses[i]
		}
	}
	if st == nil {
		return "", ""
	}
	gaveUp := func(t *corev1.ContainerStateTerminated) bool { return t != nil && t.ExitCode != 0 }
	switch {
	case st.State.Terminated != nil && st.State.Terminated.ExitCode == 0:
		// The name resolved, after however many tries.
		return "", ""
	case st.State.Running != nil && !st.State.Running.StartedAt.IsZero() && now.Sub(st.State.Running.StartedAt.Time) > dnsWaitBound:
	case gaveUp(st.State.Terminated), gaveUp(st.LastTerminationState.Terminated):
	default:
		return "", ""
	}
	text = fmt.Sprintf("waits for its DNS name %s to resolve (its init container %s has looked it up for more than %v): "+
		"check spec.pod.ClusterDomain, which must be the DNS domain of the Kubernetes cluster (usually .cluster.local) or empty, "+
		"and that the pod can reach the cluster's DNS service", k8sutil.DNSCheckName(pod), k8sutil.DNSCheckContainerName, dnsWaitBound)
	return text, "waits for its DNS name to resolve"
}

// containerTrouble describes a container that waits for something that does
// not come by itself, keeps failing, or ended with an error, and its cause.
// image is the image the pod asks the container to run.
func containerTrouble(st corev1.ContainerStatus, image string) (text, cause string) {
	switch {
	case st.State.Waiting != nil && st.State.Waiting.Reason == "CrashLoopBackOff" && st.LastTerminationState.Terminated != nil:
		t := st.LastTerminationState.Terminated
		if t.ExitCode == 0 {
			return cleanStopTrouble(st, image)
		}
		// The kubelet waits before the next restart: what matters is how
		// the last run ended.
		return fmt.Sprintf("keeps failing (%d restarts): %s", st.RestartCount, terminationSummary(t)), "keeps failing: " + terminationCause(t)
	case st.State.Waiting != nil:
		switch st.State.Waiting.Reason {
		case "", "ContainerCreating", "PodInitializing":
			return "", ""
		}
		text := "is waiting: " + st.State.Waiting.Reason
		if st.State.Waiting.Message != "" {
			text += ": " + st.State.Waiting.Message
		}
		switch st.State.Waiting.Reason {
		case "ErrImagePull", "ImagePullBackOff":
			// The kubelet alternates between the two, and with
			// CrashLoopBackOff after a patched image (cleanStopTrouble):
			// one cause for all three.
			return text, waitsForImage(image)
		}
		return text, "is waiting: " + st.State.Waiting.Reason
	case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
		return "ended: " + terminationSummary(st.State.Terminated), "ended: " + terminationCause(st.State.Terminated)
	}
	return "", ""
}

// cleanStopTrouble describes a container the kubelet backs off restarting
// after it ended with exit code 0. etcd ends so only when it is told to stop
// (as pid 1 it exits cleanly on SIGTERM): a clean exit is never why it does
// not run. When the pod now asks for another image than the one that
// stopped, the member was patched (an upgrade, or one taken back) and the
// kubelet stopped the old container to start the new image: it waits for
// that image, and between its tries to pull it the kubelet's status says
// CrashLoopBackOff, not ErrImagePull or ImagePullBackOff.
func cleanStopTrouble(st corev1.ContainerStatus, image string) (text, cause string) {
	if image != "" && st.Image != "" && !sameImage(image, st.Image) {
		return fmt.Sprintf("is waiting to start on image %s, which has not run yet: the kubelet backs off between its tries to pull and start it "+
			"(the container it replaces, on %s, was stopped cleanly); the pod's events say whether the image cannot be pulled (ErrImagePull, ImagePullBackOff)",
			image, st.Image), waitsForImage(image)
	}
	return fmt.Sprintf("keeps being stopped (%d restarts): it ended cleanly (exit code 0), as etcd does when it is told to stop, such as by the kubelet after its liveness probe failed",
		st.RestartCount), "keeps being stopped"
}

func waitsForImage(image string) string { return "waits for its image " + image }

// specImage is the image pod asks its container name to run.
func specImage(pod *corev1.Pod, name string) string {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == name {
				return c.Image
			}
		}
	}
	return ""
}

// terminationCause is how a container ended, without its log.
func terminationCause(t *corev1.ContainerStateTerminated) string {
	c := fmt.Sprintf("exit code %d", t.ExitCode)
	if t.Reason != "" {
		c += " (" + t.Reason + ")"
	}
	return c
}

// terminationSummary is the evidence a container left when it ended: exit
// code, reason and, from its termination message, which for etcd holds the
// last lines of its log (terminationMessagePolicy FallbackToLogsOnError),
// the line in which etcd says why it stopped, or else the end of the message.
func terminationSummary(t *corev1.ContainerStateTerminated) string {
	msg := terminationCause(t)
	if said := etcdStopReason(t.Message); said != "" {
		msg += ": " + firstChars(said, 400)
	} else if t.Message != "" {
		msg += ": " + lastChars(t.Message, 400)
	}
	return msg
}

// etcdStopReason picks, from the end of etcd's log, the line in which etcd
// says why it stopped; "" when no line does. The last characters of the log
// are seldom that line: a Go panic ends the log with a goroutine dump, a
// flag etcd does not take with its usage text, and a zap fatal line carries
// a stack trace of its own. In order of preference:
//   - a line at fatal level (zap's fatal, panic and dpanic; capnslog's C),
//     which etcd writes just before it exits: its message and error;
//   - a Go panic ("panic: ...", "fatal error: ..."), as an ETCD_LOG_LEVEL
//     etcd does not know ends;
//   - the flag package's complaint printed before the usage text ("flag
//     provided but not defined: -x", `invalid value "y" for flag -x: ...`);
//   - the last line at error level, else the last at warn level with an
//     error: etcd 3.5 and later refuse an ETCD_* variable they cannot parse
//     with a warning ("failed to verify flags") and exit.
func etcdStopReason(log string) string {
	var fatal, plain, errorLine, warnLine string
	lines := strings.Split(log, "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if l, ok := etcdLogLine(line); ok {
			switch l.level {
			case "fatal", "panic", "dpanic", "C":
				fatal = l.text
			case "error", "E":
				errorLine = l.text
			case "warn":
				if l.failed {
					warnLine = l.text
				}
			}
			continue
		}
		switch {
		case plain != "":
		case strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
			plain = line
		case line == "Usage:":
			plain = lastLine(lines[:i])
		}
	}
	for _, s := range []string{fatal, plain, errorLine, warnLine} {
		if s != "" {
			return s
		}
	}
	return ""
}

// zapLine is what etcdStopReason reads of a line etcd logs as JSON (zap,
// etcd 3.4 and later); its stack trace and other fields are left out.
type zapLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Error string `json:"error"`
}

// capnslogLine is a line of etcd's older log format (capnslog, the default
// up to etcd 3.4): "2006-01-02 15:04:05.000000 C | etcdmain: ...".
var capnslogLine = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ ([CEWNID]) \| (.+)$`)

// logLine is a line of etcd's own log: its level, its text (the message
// and the error, without time or caller, so that the same failure reads the
// same after every restart), and whether it carries an error.
type logLine struct {
	level, text string
	failed      bool
}

func etcdLogLine(line string) (logLine, bool) {
	if strings.HasPrefix(line, "{") {
		var z zapLine
		if json.Unmarshal([]byte(line), &z) != nil || z.Msg == "" {
			// The first line of a termination message is often cut.
			return logLine{}, false
		}
		l := logLine{level: z.Level, text: z.Msg, failed: z.Error != ""}
		if l.failed {
			l.text += ": " + z.Error
		}
		return l, true
	}
	if m := capnslogLine.FindStringSubmatch(line); m != nil {
		return logLine{level: m[1], text: m[2]}, true
	}
	return logLine{}, false
}

// lastLine is the last line of lines that is not blank.
func lastLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

func firstChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func lastChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// dataRefused finds, in the end of the log of an etcd that exited, the
// evidence that etcd refuses its data directory: a corrupt log or database,
// or a data directory of another member. Such a member is replaced at once;
// restarting it cannot help.
func dataRefused(pod *corev1.Pod) string {
	st := k8sutil.EtcdContainerStatus(pod)
	if st == nil {
		return ""
	}
	for _, t := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
		if t == nil || t.ExitCode == 0 {
			continue
		}
		msg := strings.ToLower(t.Message)
		for _, sign := range dataRefusalSigns {
			if strings.Contains(msg, sign) {
				return terminationSummary(t)
			}
		}
	}
	return ""
}

// dataRefusalSigns are what etcd logs, lower-cased, when it cannot use its
// data directory: WAL and snapshot checksums, a database that is not one,
// a data directory that belongs to another member or cluster.
var dataRefusalSigns = []string{
	"crc mismatch",
	"failed to recover v3 backend",
	"failed to open database",
	"database file is corrupt",
	"invalid database",
	"not a bolt database",
	"wal: file not found",
	"wal: max entry size limit exceeded",
	"member id mismatch",
	"mismatched member id",
	"cluster id mismatch",
	"snap: crc mismatch",
	"failed to find database snapshot file",
}
