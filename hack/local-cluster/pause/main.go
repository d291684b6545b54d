// Command pause is the sandbox ("infra") container of every pod in the local
// cluster. It holds the pod's namespaces open by doing nothing, reaps zombie
// children (it is PID 1 when the pod shares its PID namespace) and exits
// cleanly on SIGINT/SIGTERM, like the upstream pause image.
//
// It uses only the standard library and is built with CGO_ENABLED=0 so the
// image needs nothing but this one static binary.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (etcd-operator local cluster)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		default:
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap collects every exited child without blocking, so orphans re-parented
// to us do not stay zombies.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
