package kubectlplugin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
)

// cliRun runs `kubectl etcd args...` with p as the clients; the namespace
// is -n's, or "default" as a kubeconfig without one gives.
func cliRun(t *testing.T, p *Plugin, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	connect := func(flags *genericclioptions.ConfigFlags) (*Plugin, string, error) {
		if p == nil {
			return connectWithKubeconfig(flags)
		}
		namespace := "default"
		if flags.Namespace != nil && *flags.Namespace != "" {
			namespace = *flags.Namespace
		}
		return p, namespace, nil
	}
	cmd := newCommandWith(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, connect)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func TestHelpOfEveryCommandGoesToStdout(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"status", "--help"}, {"defrag", "--help"}, {"snapshot", "--help"}, {"move-leader", "--help"},
		{"compact", "--help"}, {"disarm", "--help"}, {"pause", "--help"}, {"resume", "--help"}, {"restart", "--help"}, {"logs", "--help"}, {"backup", "--help"}, {"etcdctl", "--help"}, {"report", "--help"}, {"rotate-certs", "--help"}, {"version", "--help"}, {"completion", "--help"}, {"help", "status"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, err := cliRun(t, nil, args...)
			if err != nil || errOut != "" {
				t.Fatalf("err %v, stderr %q", err, errOut)
			}
			if !strings.Contains(out, "Usage:\n  kubectl etcd") {
				t.Fatalf("stdout lacks the usage as kubectl users type it:\n%s", out)
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "bash completion", "zsh": "#compdef", "fish": "complete -c", "powershell": "Register-ArgumentCompleter",
	} {
		t.Run(shell, func(t *testing.T) {
			out, _, err := cliRun(t, nil, "completion", shell)
			if err != nil || !strings.Contains(out, want) {
				t.Fatalf("completion %s = %v, printed %.200q", shell, err, out)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	want := "kubectl-etcd " + operatorrun.Version + " (" + operatorrun.GitSHA + ")\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out, _, err := cliRun(t, nil, args...); err != nil || out != want {
			t.Errorf("%v printed %q, %v; want %q", args, out, err, want)
		}
	}
	out, _, err := cliRun(t, nil, "version", "-o", "json")
	var v clientVersion
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.ClientVersion.GitVersion != operatorrun.Version {
		t.Fatalf("version -o json printed %q, %v", out, err)
	}
	if out, _, err := cliRun(t, nil, "version", "-o", "yaml"); err != nil || !strings.Contains(out, "gitVersion: "+operatorrun.Version) {
		t.Fatalf("version -o yaml printed %q, %v", out, err)
	}
}

func TestCommandLineMistakes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"a command without a cluster name", []string{"status"}, "status takes the EtcdCluster's name, got 0"},
		{"two cluster names", []string{"compact", "a", "b"}, "compact takes the EtcdCluster's name, got 2"},
		{"an unknown flag", []string{"status", "example", "--colour"}, "unknown flag: --colour"},
		{"an unknown command", []string{"repair", "example"}, `unknown command "repair"`},
		{"a snapshot without a file", []string{"snapshot", "example"}, "snapshot needs --file"},
		{"etcdctl without --", []string{"etcdctl", "example", "member", "list"}, "then -- and etcdctl's arguments"},
		{"a certificate without its key", []string{"status", "example", "--cert", "c.pem", "--cacert", "ca.pem"}, "--key is needed"},
		{"a certificate file that is not there", []string{"status", "example", "--cert", "/nonexistent/c.pem", "--key", "k", "--cacert", "ca"}, "--cert: open /nonexistent/c.pem"},
		{"a kubeconfig that does not exist", []string{"status", "example", "--kubeconfig", "/nonexistent"}, "kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *Plugin
			if tt.name != "a kubeconfig that does not exist" {
				p = &Plugin{}
			}
			_, _, err := cliRun(t, p, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// The flags of kubectl and of the plugin go before or after the arguments,
// and snapshot's old -o FILE still writes the file, with a warning.
func TestFlagsAnywhereAndTheOldSnapshotFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	if err := f.members[0].Fill(t.Context(), "k", 10, 1<<10); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		name, warning string
		timeout       time.Duration
		args          []string
	}{
		{"--file after the name, -n first", "", 10 * time.Second, []string{"-n", ns, "snapshot", "example", "--file", filepath.Join(dir, "a.db")}},
		{"-n and --timeout after the name", "", 3 * time.Second, []string{"snapshot", "example", "-n", ns, "--timeout=3s", "--file=" + filepath.Join(dir, "b.db")}},
		{"the old -o FILE", "--output (-o) has been deprecated, use --file", 10 * time.Second, []string{"snapshot", "example", "-o", filepath.Join(dir, "c.db"), "--namespace", ns}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := cliRun(t, f.plugin, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			file := tt.args[len(tt.args)-1]
			if tt.warning != "" {
				file = tt.args[3]
			}
			file = strings.TrimPrefix(file, "--file=")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (printed %q)", err, out)
			}
			if keys, err := backuptest.CheckSnapshot(t.TempDir(), data); err != nil || keys < 10 {
				t.Fatalf("snapshot holds %d keys, %v", keys, err)
			}
			if !strings.Contains(errOut, tt.warning) || (tt.warning == "" && errOut != "") {
				t.Errorf("stderr %q, want %q", errOut, tt.warning)
			}
			if f.plugin.Timeout != tt.timeout {
				t.Errorf("etcd request timeout %v, want %v", f.plugin.Timeout, tt.timeout)
			}
		})
	}
}

func TestStatusOutputFormats(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	leader := f.podOf(t, f.health(t).LeaderID)

	out, _, err := cliRun(t, f.plugin, "status", "example", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ALARMS  RAFT TERM  RAFT INDEX  APPLIED  REVISION") {
		t.Errorf("-o wide lacks the raft columns:\n%s", out)
	}
	for _, pod := range f.pods {
		if !regexp.MustCompile(`(?m)^` + pod + `\s.*\s-\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*$`).MatchString(out) {
			t.Errorf("-o wide has no raft progress for %s:\n%s", pod, out)
		}
	}

	out, _, err = cliRun(t, f.plugin, "status", "example", "-n", ns, "-o", "json")
	var r StatusReport
	if err != nil || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("-o json printed %q, %v", out, err)
	}
	if r.Cluster != "example" || r.Leader != leader || len(r.Members) != 3 || r.Members[0].Revision == 0 || r.LastBackup != "none" {
		t.Errorf("-o json = %+v", r)
	}

	out, _, err = cliRun(t, f.plugin, "status", "example", "-n", ns, "-o", "yaml")
	if err != nil || !strings.Contains(out, "leader: "+leader) || !strings.Contains(out, "role: Leader") {
		t.Errorf("-o yaml printed %q, %v", out, err)
	}

	if _, _, err := cliRun(t, f.plugin, "status", "example", "-n", ns, "-o", "name"); err == nil || !strings.Contains(err.Error(), "wide, json or yaml") {
		t.Errorf("-o name = %v", err)
	}
}

func TestCompletionOfClustersAndMembers(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"a cluster's name", []string{"__complete", "status", "-n", ns, ""}, []string{"example", "other"}},
		{"a cluster's name by prefix", []string{"__complete", "pause", "-n", ns, "ex"}, []string{"example"}},
		{"a member of the cluster, not a stranger pod", []string{"__complete", "restart", "example", "-n", ns, ""}, []string{"example-m0", "example-m1", "example-m2"}},
		{"nothing after the cluster of a one-argument command", []string{"__complete", "status", "example", "-n", ns, ""}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, nil)
			out, _, err := cliRun(t, f.plugin, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			// Cobra prints one candidate a line, then ":<directive>".
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, ":") && l != "" {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("completed %q, want %q (output %q)", got, tt.want, out)
			}
		})
	}
}
