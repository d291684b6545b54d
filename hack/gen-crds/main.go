// Command gen-crds writes the CRD manifests under example/crd from the Go definitions
// the operators install themselves, so both install paths carry the same schema.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openetcd/etcd-operator/pkg/util/crdutil"
)

func main() {
	out := flag.String("o", "example/crd", "directory to write the manifests to")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, crd := range crdutil.All() {
		data, err := crdutil.YAML(crd)
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, crdutil.FileName(crd)), data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
