// Package framework is the small toolkit of the end-to-end suite in test/e2e: the
// local cluster's settings, typed clients, kubectl, waits that poll with deadlines,
// etcdctl inside the cluster, the operator installed the way users install it, and
// the dumps that make a failed test explain itself.
//
// It has no build tag, so `go vet ./...` keeps it compiling as the code it drives
// changes; the tests themselves are behind the e2e tag.
package framework

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// DefaultEnvFile is written by hack/local-cluster/up.sh once the local cluster is up.
const DefaultEnvFile = "/var/lib/etcd-operator-local/env"

// Env is what the suite needs to know about the cluster it runs against.
type Env struct {
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig string
	// Kubectl is the absolute path of the kubectl matching the local cluster's version;
	// a kubectl from PATH may be of another version and is never used.
	Kubectl string
	// NodeIP is the address pods use to reach servers on the host.
	NodeIP string
	// NodeName is the host's node: the only one, or the first of several,
	// where the control plane runs.
	NodeName string
	// Nodes is how many nodes the local cluster has (make local-up NODES=3):
	// the host's and the extra nodes hack/local-cluster/node.sh can stop,
	// lose, cut off and drain.
	Nodes int
	// RepoRoot is the project's root directory, where example/ and hack/ are.
	RepoRoot string
	// OperatorImage is the image the operator Deployments run; example/deployment.yaml
	// already names the tag the local cluster imports.
	OperatorImage string
	// ArtifactsDir receives the dumps of failed tests.
	ArtifactsDir string
	// KeepNamespaces leaves namespaces and cluster-scoped objects behind for inspection.
	KeepNamespaces bool
}

// LoadEnv reads the settings from the environment; whatever is not set there is read
// from the env file of the local cluster (E2E_ENV_FILE, default DefaultEnvFile), the
// file hack/e2e.sh sources too. A missing cluster is an error that says how to get one.
func LoadEnv() (*Env, error) {
	file := os.Getenv("E2E_ENV_FILE")
	if file == "" {
		file = DefaultEnvFile
		if dir := os.Getenv("LOCAL_CLUSTER_STATE_DIR"); dir != "" {
			file = filepath.Join(dir, "env")
		}
	}
	fromFile, err := readEnvFile(file)
	if err != nil && os.Getenv("KUBECTL") == "" {
		return nil, fmt.Errorf("no cluster to test against: %v; bring the local cluster up with `sudo make local-up` (or set KUBECONFIG and KUBECTL)", err)
	}
	get := func(key string) string {
		if v := os.Getenv(key); v != "" {
			return v
		}
		return fromFile[key]
	}
	root := repoRoot()
	e := &Env{
		Kubeconfig:     get("KUBECONFIG"),
		Kubectl:        get("KUBECTL"),
		NodeIP:         get("NODE_IP"),
		NodeName:       get("NODE_NAME"),
		RepoRoot:       root,
		OperatorImage:  os.Getenv("E2E_OPERATOR_IMAGE"),
		ArtifactsDir:   os.Getenv("E2E_ARTIFACTS"),
		KeepNamespaces: os.Getenv("E2E_KEEP_NAMESPACES") == "1",
	}
	e.Nodes = 1
	if n, err := strconv.Atoi(get("LOCAL_CLUSTER_NODES")); err == nil && n > 0 {
		e.Nodes = n
	}
	if e.ArtifactsDir == "" {
		e.ArtifactsDir = filepath.Join(root, "_output", "e2e", "artifacts")
	}
	switch {
	case e.Kubeconfig == "":
		return nil, fmt.Errorf("KUBECONFIG is not set and %s does not name one", file)
	case e.Kubectl == "" || !filepath.IsAbs(e.Kubectl):
		return nil, fmt.Errorf("KUBECTL must be the absolute path of the local cluster's kubectl (got %q); source %s", e.Kubectl, file)
	case e.NodeIP == "":
		return nil, fmt.Errorf("NODE_IP is not set; source %s", file)
	}
	if _, err := os.Stat(e.Kubectl); err != nil {
		return nil, fmt.Errorf("kubectl %s: %w (is the local cluster built? `sudo make local-up`)", e.Kubectl, err)
	}
	return e, nil
}

// readEnvFile parses the `export KEY=VALUE` lines up.sh writes. Values are plain
// paths and addresses, never quoted or expanded.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		vars[k] = strings.Trim(v, `"'`)
	}
	return vars, sc.Err()
}

// repoRoot is found from this file's location, so tests work from any directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Path joins a path relative to the repository root.
func (e *Env) Path(rel ...string) string {
	return filepath.Join(append([]string{e.RepoRoot}, rel...)...)
}
