package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
)

// Framework holds the clients every test shares. It is safe for concurrent use.
type Framework struct {
	Env    *Env
	Config *rest.Config
	Kube   kubernetes.Interface
	Etcd   versioned.Interface
	APIExt apiextclient.Interface
}

// New loads the environment and builds the clients.
func New() (*Framework, error) {
	env, err := LoadEnv()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", env.Kubeconfig, err)
	}
	// Parallel tests poll many objects; client-go's default of 5 QPS would turn
	// their waits into queueing and skew every measured time.
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "etcd-operator-e2e"
	f := &Framework{Env: env, Config: cfg}
	if f.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if f.Etcd, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if f.APIExt, err = apiextclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return f, nil
}

// CommandError is a failed command with its output, so that a test failure shows
// what the command said.
type CommandError struct {
	Cmd    string
	Err    error
	Stdout string
	Stderr string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Cmd, e.Err)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += "\nstderr: " + s
	}
	if s := strings.TrimSpace(e.Stdout); s != "" {
		msg += "\nstdout: " + truncate(s, 2000)
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// Kubectl runs $KUBECTL with the suite's kubeconfig and returns its stdout.
func (f *Framework) Kubectl(ctx context.Context, args ...string) (string, error) {
	return f.KubectlStdin(ctx, "", args...)
}

// KubectlStdin is Kubectl with stdin, for `kubectl create -f -`.
func (f *Framework) KubectlStdin(ctx context.Context, stdin string, args ...string) (string, error) {
	return f.Run(ctx, Cmd{Name: f.Env.Kubectl, Args: args, Stdin: stdin})
}

// Cmd is a command for Run.
type Cmd struct {
	Name  string
	Args  []string
	Env   []string // added to the suite's environment
	Dir   string
	Stdin string
}

// Run runs a command with KUBECONFIG and KUBECTL set, the way a user who sourced the
// local cluster's env file would run it, and returns its stdout.
func (f *Framework) Run(ctx context.Context, c Cmd) (string, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Env.Kubeconfig, "KUBECTL="+f.Env.Kubectl)
	cmd.Env = append(cmd.Env, c.Env...)
	cmd.Dir = c.Dir
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	// Without WaitDelay a killed kubectl exec can leave its output pipes open
	// and hang the test past its context.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &CommandError{
			Cmd:    strings.TrimSpace(strings.Join(append(c.Env, append([]string{c.Name}, c.Args...)...), " ")),
			Err:    err,
			Stdout: stdout.String(),
			Stderr: stderr.String(),
		}
	}
	return stdout.String(), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d more bytes)", len(s)-n)
}
