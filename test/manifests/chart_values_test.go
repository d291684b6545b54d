package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// A value the chart does not know, or of the wrong type or outside its set,
// fails helm template and helm lint with a message that names it, instead of
// being ignored.
func TestChartRefusesMistypedValues(t *testing.T) {
	helm := tool(t, "HELM", "helm")
	for _, tc := range []struct {
		name, set, want string
	}{
		{"a key the chart does not have", "replicaCount=2", "additional properties 'replicaCount' not allowed"},
		{"a misspelled operators key", "operator.imagee=x", "additional properties 'operator' not allowed"},
		{"a misspelled key of one operator", "operators.backup.replica=2", "at '/operators/backup': additional properties 'replica' not allowed"},
		{"a scope outside its set", "scope=everywhere", "at '/scope': value must be one of 'namespace', 'cluster'"},
		{"a log level outside its set", "logLevel=verbose", "at '/logLevel': value must be one of"},
		{"a pull policy outside its set", "image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"},
		{"a number that is a word", "operators.cluster.replicas=two", "at '/operators/cluster/replicas': got string, want integer"},
		{"a switch that is a word", "crds.install=maybe", "at '/crds/install': got string, want boolean"},
		{"a pod label that is not a string", "podLabels.team.name=a", "at '/podLabels/team': got object, want string"},
		{"a misspelled NetworkPolicy switch", "networkPolicy.enable=true", "at '/networkPolicy': additional properties 'enable' not allowed"},
		{"a cloud identity lent to a namespace that cannot exist", "cloudIdentity.namespaces={Team A}", "at '/cloudIdentity/namespaces/0': 'Team A' does not match pattern"},
		{"a cloud identity lent to one namespace as a string", "cloudIdentity.namespaces=team-a", "at '/cloudIdentity/namespaces': got string, want array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"template", "lint"} {
				args := []string{cmd, chartDir(t), "--set", tc.set}
				if cmd == "template" {
					args = append([]string{cmd, "rel"}, args[1:]...)
				}
				out, err := execOutput(t, helm, args...)
				if err == nil || !strings.Contains(out, tc.want) {
					t.Errorf("helm %s --set %s: err %v, want a message containing %q; output:\n%s", cmd, tc.set, err, tc.want, out)
				}
			}
		})
	}
}

// The chart declares the oldest Kubernetes it supports: the CRDs' CEL
// validation rules are GA from 1.29.
func TestChartNeedsKubernetes129(t *testing.T) {
	helm := tool(t, "HELM", "helm")
	for version, ok := range map[string]bool{
		"1.28.9": false, "1.29.0": true, "1.32.2": true,
		"v1.30.4-eks-a737599": true, "1.31.1-gke.1146000": true,
	} {
		out, err := execOutput(t, helm, "template", "rel", chartDir(t), "--kube-version", version)
		if (err == nil) != ok {
			t.Errorf("Kubernetes %s: err %v, want installable %v\n%.300s", version, err, ok, out)
		}
	}
}

// schemaNode is the part of values.schema.json the table is made from.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Type                 string                 `json:"type"`
	Description          string                 `json:"description"`
	Enum                 []string               `json:"enum"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties any                    `json:"additionalProperties"`
	Definitions          map[string]*schemaNode `json:"definitions"`
}

// valuesTable is the chart README's table of values: one row per value of
// values.yaml, in its order, with its default and the schema's description.
// It fails the test on a value the schema does not describe, a described
// value without a default, and an object of the chart's own whose schema
// admits unknown keys.
func valuesTable(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var root schemaNode
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	data, err = os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	rows.WriteString("| value | default | |\n|---|---|---|\n")
	var walk func(path string, values *yamlv3.Node, schema *schemaNode)
	walk = func(path string, values *yamlv3.Node, schema *schemaNode) {
		if schema.AdditionalProperties != false {
			t.Errorf("values.schema.json: %s admits keys it does not name (additionalProperties: false)", orRoot(path))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(values.Content); i += 2 {
			key, value := values.Content[i].Value, values.Content[i+1]
			name := strings.TrimPrefix(path+"."+key, ".")
			seen[key] = true
			prop := schema.Properties[key]
			if prop == nil {
				t.Errorf("values.yaml has %s, values.schema.json does not describe it", name)
				continue
			}
			description := prop.Description
			if prop.Ref != "" {
				prop = root.Definitions[strings.TrimPrefix(prop.Ref, "#/definitions/")]
				if prop == nil {
					t.Fatalf("values.schema.json: %s refers to %s, which is not there", name, schema.Properties[key].Ref)
				}
			}
			if prop.Properties != nil {
				walk(name, value, prop)
				continue
			}
			if description == "" {
				t.Errorf("values.schema.json: %s has no description", name)
			}
			var v any
			if err := value.Decode(&v); err != nil {
				t.Fatal(err)
			}
			def, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if len(prop.Enum) > 0 {
				description += " One of `" + strings.Join(prop.Enum, "`, `") + "`."
			}
			fmt.Fprintf(&rows, "| `%s` | `%s` | %s |\n", name, def, strings.ReplaceAll(description, "|", `\|`))
		}
		for key := range schema.Properties {
			if !seen[key] && key != "global" {
				t.Errorf("values.schema.json describes %s, values.yaml gives it no default", strings.TrimPrefix(path+"."+key, "."))
			}
		}
	}
	walk("", doc.Content[0], &root)
	return rows.String()
}

func orRoot(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

const tableBegin, tableEnd = "<!-- values table: written by go test ./test/manifests -update -->\n", "<!-- end of the values table -->\n"

// Every value of values.yaml is in the schema and in the chart's README,
// with its default and what it does; the README's table is written from the
// schema's descriptions and values.yaml's defaults.
func TestChartReadmeDocumentsEveryValue(t *testing.T) {
	table := valuesTable(t)
	path := filepath.Join(chartDir(t), "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(readme, []byte(tableBegin)), bytes.Index(readme, []byte(tableEnd))
	if begin < 0 || end < begin {
		t.Fatalf("%s has no values table between %q and %q", path, tableBegin, tableEnd)
	}
	want := slices.Concat(readme[:begin+len(tableBegin)], []byte(table), readme[end:])
	derived(t, path, want, "README.md with the values table of values.yaml and values.schema.json")
}
