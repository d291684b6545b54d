package k8sutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	corev1 "k8s.io/api/core/v1"
)

func TestDNSCheckScriptText(t *testing.T) {
	const addr = "example-2mkrq6cz9x.example.default.svc"
	tests := []struct {
		name        string
		timeout     int64
		mustHave    []string
		mustNotHave []string
	}{
		{
			name:        "zero waits forever",
			timeout:     0,
			mustHave:    []string{"until nslookup " + addr + "; do", "sleep 1"},
			mustNotHave: []string{"Timed out", "exit 1", "deadline"},
		},
		{
			name:     "a timeout gives up with the original's message",
			timeout:  30,
			mustHave: []string{"until nslookup " + addr + "; do", "+ 30 ))", `echo "Timed out waiting for DNS entry"`, "exit 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := dnsCheckScript(addr, tt.timeout)
			for _, s := range tt.mustHave {
				if !strings.Contains(script, s) {
					t.Errorf("script lacks %q:\n%s", s, script)
				}
			}
			for _, s := range tt.mustNotHave {
				if strings.Contains(script, s) {
					t.Errorf("script has %q:\n%s", s, script)
				}
			}
		})
	}
}

// TestDNSCheckScriptRuns runs the script under /bin/sh with fake nslookup,
// date and sleep commands: nslookup fails until its nth call, and every call
// of date is one second later than the previous one, so the test takes no
// real time.
func TestDNSCheckScriptRuns(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	const addr = "example-2mkrq6cz9x.example.default.svc"
	tests := []struct {
		name          string
		timeout       int64
		succeedOnCall int // 0: nslookup never succeeds
		wantExit      int
		wantLookups   int
		wantTimeout   bool
	}{
		{"without timeout it retries until the name resolves", 0, 5, 0, 5, false},
		{"without timeout it never gives up", 0, 60, 0, 60, false},
		{"with a timeout it succeeds when the name resolves in time", 30, 3, 0, 3, false},
		{"with a timeout it gives up after that many seconds", 30, 0, 1, 30, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fake := func(name, body string) {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// Only shell built-ins below: PATH holds nothing but the fakes.
			counter := func(file string) string {
				return "n=0; [ -f " + file + " ] && read n < " + file + "; n=$((n+1)); echo $n > " + file + "\n"
			}
			fake("nslookup", counter(filepath.Join(dir, "lookups"))+
				`echo "$1" > `+filepath.Join(dir, "looked-up")+"\n"+
				`[ "`+strconv.Itoa(tt.succeedOnCall)+`" -ne 0 ] && [ "$n" -ge `+strconv.Itoa(tt.succeedOnCall)+` ]`+"\n")
			fake("date", counter(filepath.Join(dir, "clock"))+"echo $((1700000000 + n))\n")
			fake("sleep", "exit 0\n")

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "/bin/sh", "-c", dnsCheckScript(addr, tt.timeout))
			cmd.Env = []string{"PATH=" + dir}
			out, err := cmd.CombinedOutput()

			exit := 0
			if exitErr, ok := err.(*exec.ExitError); ok {
				exit = exitErr.ExitCode()
			} else if err != nil {
				t.Fatalf("run script: %v\n%s", err, out)
			}
			if exit != tt.wantExit {
				t.Errorf("exit code = %d, want %d; output:\n%s", exit, tt.wantExit, out)
			}
			if got := strings.Contains(string(out), "Timed out waiting for DNS entry"); got != tt.wantTimeout {
				t.Errorf("timed-out message printed = %v, want %v; output:\n%s", got, tt.wantTimeout, out)
			}
			if got := readCount(t, filepath.Join(dir, "lookups")); got != tt.wantLookups {
				t.Errorf("nslookup ran %d times, want %d", got, tt.wantLookups)
			}
			looked, _ := os.ReadFile(filepath.Join(dir, "looked-up"))
			if got := strings.TrimSpace(string(looked)); got != addr {
				t.Errorf("nslookup looked up %q, want %q", got, addr)
			}
		})
	}
}

func readCount(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read counter: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("counter %q: %v", b, err)
	}
	return n
}

func TestDNSCheckName(t *testing.T) {
	tests := []struct {
		name, domain, want string
	}{
		{"without a cluster domain the name relies on the resolver's search path", "", "example-2mkrq6cz9x.example.default.svc"},
		{"the cluster domain ends the name", ".cluster.local", "example-2mkrq6cz9x.example.default.svc.cluster.local"},
		{"a wrong cluster domain is the name looked up", ".cluster.locl", "example-2mkrq6cz9x.example.default.svc.cluster.locl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCluster(func(c *v1beta2.EtcdCluster) { c.Spec.Pod = &v1beta2.PodPolicy{ClusterDomain: tt.domain} })
			if got := DNSCheckName(newSeedPod(c)); got != tt.want {
				t.Errorf("DNSCheckName = %q, want %q", got, tt.want)
			}
		})
	}
	if got := DNSCheckName(&corev1.Pod{}); got != "" {
		t.Errorf("DNSCheckName of a pod without check-dns = %q, want none", got)
	}
}
