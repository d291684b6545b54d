// Package apitest loads the table of invalid custom resources (../testdata/invalid.yaml)
// that the Go validation, the CRD schema and the end-to-end suite are all tested against.
package apitest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"sigs.k8s.io/yaml"
)

// InvalidCase is one invalid object and the errors each layer must report.
type InvalidCase struct {
	Name     string         `json:"name"`
	Kind     string         `json:"kind"`
	Metadata map[string]any `json:"metadata"`
	Spec     map[string]any `json:"spec"`
	// GoError is a substring of the Go validation (or decoding) error.
	GoError string `json:"go"`
	// SchemaError is a substring of the admission error; empty when the object is admitted.
	SchemaError string `json:"schema"`
}

// DefaultName names objects whose case gives no metadata.
const DefaultName = "example"

// Object is the case as an unstructured object, ready to be marshalled.
func (c InvalidCase) Object(namespace string) map[string]any {
	meta := map[string]any{"name": DefaultName}
	for k, v := range c.Metadata {
		meta[k] = v
	}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{
		"apiVersion": "etcd.database.coreos.com/v1beta2",
		"kind":       c.Kind,
		"metadata":   meta,
		"spec":       c.Spec,
	}
}

// TestdataDir is the absolute path of pkg/apis/etcd/v1beta2/testdata.
func TestdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// LoadInvalid reads the table of invalid objects.
func LoadInvalid() ([]InvalidCase, error) {
	data, err := os.ReadFile(filepath.Join(TestdataDir(), "invalid.yaml"))
	if err != nil {
		return nil, err
	}
	var cases []InvalidCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		return nil, fmt.Errorf("parse invalid.yaml: %w", err)
	}
	return cases, nil
}
