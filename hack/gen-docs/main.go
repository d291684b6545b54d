// Command gen-docs writes the documentation pages that are made from the code
// or from measurements, so that they cannot drift from what they describe:
//
//	gen-docs reference -o docs/reference
//	    api.md (from the CRDs the operators install, whose descriptions are
//	    the API types' doc comments) and events.md (from the cluster's
//	    problem vocabulary, pkg/cluster.Problems and friends). `make docs`
//	    runs it; hack/verify-docs.sh fails when the committed pages differ.
//	gen-docs results [-check]
//	    renders every page of docs/results from its committed data,
//	    docs/results/data/<page>-<section>.json (`make docs`); with -check it
//	    writes nothing and fails, naming the page, when a committed page
//	    differs (hack/verify-docs.sh runs it).
//	gen-docs bench -in _output/bench -since FILE -commit SHA
//	    the latest `make bench` run's tables into the data of bench.md, then
//	    the page (hack/bench/run.sh calls it).
//	gen-docs chaos -in _output/chaos/results.json -tenant _output/chaos/tenant.json -commit SHA
//	    the latest `make chaos` run's tables (the matrix, the tenant control
//	    plane's scenarios; either may be left out with an empty flag) into the
//	    data of chaos.md, then the page (hack/chaos.sh calls it).
//	gen-docs backup-restore -in _output/bench/backup-restore -since FILE -commit SHA
//	    the reports of a run of hack/bench/backup or hack/bench/restore (or
//	    TestMeasureRestore) into the data of backup-restore.md, then the page
//	    (hack/bench/backup/run.sh and hack/bench/restore/run.sh call it).
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
	case "backup-restore":
		err = runBackupRestore(args)
	case "results":
		err = runResults(args)
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
	fmt.Fprintln(os.Stderr, "usage: gen-docs reference|results|bench|chaos|backup-restore|links [flags]; gen-docs <command> -h for its flags")
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
