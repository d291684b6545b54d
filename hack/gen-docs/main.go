// Command gen-docs writes the documentation pages that are made from the code
// or from measurements, so that they cannot drift from what they describe:
//
//	gen-docs reference -o docs/reference
//	    api.md (from the CRDs the operators install, whose descriptions are
//	    the API types' doc comments) and events.md (from the cluster's
//	    problem vocabulary, pkg/cluster.Problems and friends). `make docs`
//	    runs it; hack/verify-docs.sh fails when the committed pages differ.
//	gen-docs bench -in _output/bench -since FILE -commit SHA -o docs/results/bench.md
//	    the latest `make bench` run's tables (hack/bench/run.sh calls it).
//	gen-docs chaos -in _output/chaos/results.json -commit SHA -o docs/results/chaos.md
//	    the latest `make chaos` run's table (hack/chaos.sh calls it).
//	gen-docs links [-root .]
//	    fails on a relative link or #anchor of a markdown page that does not
//	    resolve, and on a page#anchor named in code, scripts or the chart that
//	    does not (hack/verify-docs.sh runs it).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "reference":
		err = runReference(args)
	case "bench":
		err = runBench(args)
	case "chaos":
		err = runChaos(args)
	case "links":
		err = runLinks(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-docs:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gen-docs reference|bench|chaos|links [flags]; gen-docs <command> -h for its flags")
	os.Exit(2)
}

func runReference(args []string) error {
	fs := flag.NewFlagSet("reference", flag.ExitOnError)
	out := fs.String("o", "docs/reference", "directory for api.md and events.md")
	_ = fs.Parse(args)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "api.md"), []byte(apiReference()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "events.md"), []byte(eventsReference()), 0o644)
}
