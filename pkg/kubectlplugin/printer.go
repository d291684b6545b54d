package kubectlplugin

import (
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/scheme"
)

// objectPrinter prints the object a command changed or made, with -o
// json|yaml|name|jsonpath=...|go-template=..., as kubectl create and patch
// do. Without -o the command prints its own sentence instead.
type objectPrinter struct {
	flags *genericclioptions.PrintFlags
}

// addObjectPrinter adds -o and the template flags to cmd; operation is the
// past participle `-o name` prints after the name ("paused").
func addObjectPrinter(cmd *cobra.Command, operation string) *objectPrinter {
	f := genericclioptions.NewPrintFlags(operation).WithTypeSetter(scheme.Scheme)
	f.AddFlags(cmd)
	return &objectPrinter{flags: f}
}

// chosen tells whether the user asked for an output format.
func (o *objectPrinter) chosen() bool {
	return o.flags.OutputFormat != nil && *o.flags.OutputFormat != ""
}

// sentences is where the command's own sentences go: nowhere when an
// output format was chosen, so that -o json prints only the object.
func (o *objectPrinter) sentences(w io.Writer) io.Writer {
	if o.chosen() {
		return io.Discard
	}
	return w
}

func (o *objectPrinter) print(obj runtime.Object, w io.Writer) error {
	if !o.chosen() {
		return nil
	}
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(obj, w)
}
