// Command etcd-checker proves an etcd cluster under faults: several clients write
// and read a small key space through the cluster's client service for a while,
// every operation recorded with its call and return time; then every key is read
// back and the history is checked for linearizability (porcupine) and for
// acknowledged writes missing at the end. It runs as a pod next to the cluster
// (the operator image ships it) while a fault is injected.
//
// Its last line on stdout is the result as JSON, prefixed with "RESULT "; the exit
// status is 0 when the history is linearizable and nothing acknowledged was lost,
// 1 when not, 2 when it could not run. When the history is not linearizable,
// porcupine's HTML visualisation of it is written to -visualization and, because
// an ended pod's files cannot be copied out, also printed before the result as an
// artifact (checker.WriteArtifact) that checker.ReadArtifact finds in the log.
//
// Against a cluster with client TLS (spec.TLS.static) the endpoints are https and
// -cacert, -cert and -key name the files of the cluster's client secret
// (etcd-client-ca.crt, etcd-client.crt, etcd-client.key) as a pod mounts them.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// ResultPrefix starts the line that carries the result.
const ResultPrefix = "RESULT "

type options struct {
	cfg           checker.Config
	endpoints     string
	scenario      string
	checkTimeout  time.Duration
	visualization string
	caFile        string
	certFile      string
	keyFile       string
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
	fs.StringVar(&o.caFile, "cacert", "", "CA of the members' client certificates (https endpoints), e.g. etcd-client-ca.crt of the client secret")
	fs.StringVar(&o.certFile, "cert", "", "client certificate presented to members that run with --client-cert-auth (with -key)")
	fs.StringVar(&o.keyFile, "key", "", "key of -cert")
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
	case (o.certFile == "") != (o.keyFile == ""):
		return o, fmt.Errorf("-cert and -key go together")
	case o.certFile != "" && o.caFile == "":
		// The members' certificates come from the cluster's own CA, never from
		// the system pool: without it no https endpoint verifies.
		return o, fmt.Errorf("-cert needs -cacert")
	}
	if o.caFile != "" {
		tlsCfg, err := tlsConfig(o.caFile, o.certFile, o.keyFile)
		if err != nil {
			return o, err
		}
		o.cfg.TLS = tlsCfg
		for _, e := range o.cfg.Endpoints {
			if !strings.HasPrefix(e, "https://") {
				return o, fmt.Errorf("endpoint %s is not https, but -cacert is given", e)
			}
		}
	}
	return o, nil
}

// tlsConfig reads the client secret's files as a pod mounts them.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	if certFile != "" {
		return etcdutil.TLSConfigFromFiles(certFile, keyFile, caFile)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls config: %w", err)
	}
	return etcdutil.NewTLSConfig(nil, nil, ca)
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
	if r.Visualization != "" {
		if html, err := os.ReadFile(r.Visualization); err != nil {
			log.WithError(err).Error("read the visualization back")
		} else if err := checker.WriteArtifact(stdout, filepath.Base(r.Visualization), html); err != nil {
			log.WithError(err).Error("print the visualization")
		}
	}
	out, _ := json.Marshal(r)
	fmt.Fprintf(stdout, "%s%s\n", ResultPrefix, out)
	if !r.Passed() {
		log.WithField("result", r.String()).Error("FAILED: not linearizable, an acknowledged write lost, or no answer to the read-back")
		return 1
	}
	log.WithField("result", r.String()).Info("passed")
	return 0
}
