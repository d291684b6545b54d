// Command kubectl-etcd is a kubectl plugin (`kubectl etcd ...`) for day-2
// care of the etcd clusters etcd-operator runs. It uses the caller's own
// kubeconfig and RBAC; pkg/kubectlplugin holds its commands.
//
// Its version is operatorrun.Version (and GitSHA), set at build time with
// -ldflags "-X github.com/openetcd/etcd-operator/pkg/operatorrun.Version=...".
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/openetcd/etcd-operator/pkg/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := kubectlplugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
