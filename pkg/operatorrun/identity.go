package operatorrun

import (
	"errors"
	"fmt"
	"runtime"
)

// Environment variables set from the downward API by the example Deployments.
const (
	EnvPodNamespace = "MY_POD_NAMESPACE"
	EnvPodName      = "MY_POD_NAME"
)

// Version is the operators' version, set at build time from git (make build,
// the image and the release: hack/version.sh) with
// -ldflags "-X github.com/openetcd/etcd-operator/pkg/operatorrun.Version=...".
// A plain go build says it does not know rather than name a release it may
// not be.
var Version = "v0.0.0-unknown"

// GitSHA is the commit the binaries were built from, set the same way.
var GitSHA = "unknown"

// VersionString is what -version prints.
func VersionString(binary string) string {
	return fmt.Sprintf("%s Version: %s\nGit SHA: %s\nGo Version: %s\nGo OS/Arch: %s/%s",
		binary, Version, GitSHA, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Identity is where the operator runs: its namespace holds the leader-election Lease
// and, unless it runs cluster-wide, the resources it watches.
type Identity struct {
	Namespace string
	PodName   string
}

// IdentityFromEnv reads the identity the Deployment passes through the downward API.
func IdentityFromEnv(getenv func(string) string) (Identity, error) {
	id := Identity{Namespace: getenv(EnvPodNamespace), PodName: getenv(EnvPodName)}
	var errs []error
	if id.Namespace == "" {
		errs = append(errs, fmt.Errorf("%s is not set: set it from the downward API (fieldRef metadata.namespace) as example/deployment.yaml does, or export it when running outside a cluster", EnvPodNamespace))
	}
	if id.PodName == "" {
		errs = append(errs, fmt.Errorf("%s is not set: set it from the downward API (fieldRef metadata.name) as example/deployment.yaml does, or export it when running outside a cluster", EnvPodName))
	}
	return id, errors.Join(errs...)
}
