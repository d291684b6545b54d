// Command etcd-checker proves an etcd cluster under faults: several clients write
// and read a small key space through the cluster's client service for a while,
// every operation recorded with its call and return time; then every key is read
// back and the history is checked for linearizability (porcupine) and for
// acknowledged writes missing at the end. It runs as a pod next to the cluster
// (the operator image ships it) while a fault is injected.
//
// Its last line on stdout is the result as JSON, prefixed with "RESULT "; the exit
// status is 0 when the history is linearizable and nothing acknowledged was lost,
// 1 when not, 2 when it could not run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/openetcd/etcd-operator/test/checker"
)

// ResultPrefix starts the line that carries the result.
const ResultPrefix = "RESULT "

type options struct {
	cfg           checker.Config
	endpoints     string
	scenario      string
	checkTimeout  time.Duration
	visualization string
}

func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("etcd-checker", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.endpoints, "endpoints", "", "comma-separated client URLs, e.g. http://example-client:2379 (required)")
	fs.StringVar(&o.scenario, "scenario", "", "name of the fault scenario, copied into the result")
	fs.IntVar(&o.cfg.Clients, "clients", 4, "concurrent clients, each with its own connection")
	fs.IntVar(&o.cfg.Keys, "keys", 8, "keys of the register key space")
	fs.StringVar(&o.cfg.Prefix, "prefix", "/etcd-checker/", "prefix of every key written")
	fs.DurationVar(&o.cfg.Duration, "duration", time.Minute, "how long the workload runs")
	fs.Float64Var(&o.cfg.Rate, "rate", 50, "operations per second of each client, at most")
	fs.DurationVar(&o.cfg.OpTimeout, "op-timeout", 2*time.Second, "timeout of one operation; a write past it has an unknown outcome")
	fs.DurationVar(&o.cfg.Settle, "settle", 3*time.Minute, "how long the final read-back waits for the cluster to serve")
	fs.Uint64Var(&o.cfg.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the operation mix")
	fs.DurationVar(&o.checkTimeout, "check-timeout", 5*time.Minute, "bound of the linearizability search (then the verdict is \"unknown\")")
	fs.StringVar(&o.visualization, "visualization", "", "write porcupine's HTML of a non-linearizable history here")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, e := range strings.Split(o.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			o.cfg.Endpoints = append(o.cfg.Endpoints, e)
		}
	}
	switch {
	case len(o.cfg.Endpoints) == 0:
		return o, fmt.Errorf("-endpoints is required")
	case o.cfg.Clients < 1 || o.cfg.Keys < 1:
		return o, fmt.Errorf("-clients and -keys must be at least 1")
	case o.cfg.Duration <= 0 || o.cfg.Rate <= 0 || o.cfg.OpTimeout <= 0:
		return o, fmt.Errorf("-duration, -rate and -op-timeout must be positive")
	}
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(stderr, "etcd-checker:", err)
		return 2
	}
	logger := logrus.New()
	logger.SetOutput(stderr)
	log := logger.WithField("scenario", o.scenario)
	o.cfg.Log = log

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.WithFields(logrus.Fields{"endpoints": o.cfg.Endpoints, "clients": o.cfg.Clients, "keys": o.cfg.Keys,
		"duration": o.cfg.Duration, "seed": o.cfg.Seed}).Info("workload started")
	h, err := checker.Run(ctx, o.cfg)
	if err != nil {
		log.WithError(err).Error("workload")
		return 2
	}
	r, err := checker.Check(h, checker.CheckOptions{Timeout: o.checkTimeout, VisualizationPath: o.visualization})
	if err != nil {
		log.WithError(err).Error("check")
	}
	r.Scenario = o.scenario
	out, _ := json.Marshal(r)
	fmt.Fprintf(stdout, "%s%s\n", ResultPrefix, out)
	if !r.Passed() {
		log.WithField("result", r.String()).Error("FAILED: not linearizable, an acknowledged write lost, or no answer to the read-back")
		return 1
	}
	log.WithField("result", r.String()).Info("passed")
	return 0
}
