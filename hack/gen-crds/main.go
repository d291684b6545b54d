// Command gen-crds writes the CRD manifests under example/crd from the Go definitions
// the operators install themselves, so both install paths carry the same schema.
// With -fielddocs it first extracts the API types' doc comments, which become the
// schema's descriptions (kubectl explain).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openetcd/etcd-operator/pkg/crds"
)

func main() {
	out := flag.String("o", "example/crd", "directory to write the manifests to")
	docs := flag.String("fielddocs", "", "write the API types' field docs to this Go file instead of the manifests")
	flag.Parse()
	if *docs != "" {
		if err := writeFieldDocs(*docs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, crd := range crds.All() {
		data, err := crds.YAML(crd)
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, crds.FileName(crd)), data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
