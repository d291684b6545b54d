package crds

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2/apitest"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/equality"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// admission runs a definition's schema the way kube-apiserver does on create and update:
// the OpenAPI validator and list uniqueness, then the CEL rules.
type admission struct {
	openapi    schemavalidation.SchemaValidator
	structural *structuralschema.Structural
	cel        *cel.Validator
}

func newAdmission(t *testing.T, crd *apiextv1.CustomResourceDefinition) *admission {
	t.Helper()
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatal(err)
	}
	// The apiserver fills in storedVersions; the rest of the definition must be valid as written.
	internal.Status.StoredVersions = []string{"v1beta2"}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
		t.Fatalf("the apiserver would refuse CRD %s: %v", crd.Name, errs.ToAggregate())
	}
	// With a single version, the conversion hoists its schema to spec.validation.
	s := internal.Spec.Validation.OpenAPIV3Schema
	openapi, _, err := schemavalidation.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(s)
	if err != nil {
		t.Fatal(err)
	}
	return &admission{openapi: openapi, structural: structural, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
}

func (a *admission) check(obj, old map[string]any) field.ErrorList {
	errs := schemavalidation.ValidateCustomResource(nil, obj, a.openapi)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, a.structural, obj)...)
	if len(errs) > 0 {
		return errs
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := a.cel.Validate(context.Background(), nil, a.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	return celErrs
}

func admissions(t *testing.T) map[string]*admission {
	out := map[string]*admission{}
	for _, crd := range All() {
		out[crd.Spec.Names.Kind] = newAdmission(t, crd)
	}
	return out
}

// roundTrip gives the object the JSON types the apiserver sees: whole numbers
// decode as int64 (apimachinery's json), so the schema's messages read as the
// apiserver's do ("31536000", never "3.1536e+07").
func roundTrip(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSchemaRejectsInvalidCases(t *testing.T) {
	adm := admissions(t)
	cases, err := apitest.LoadInvalid()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			errs := adm[tc.Kind].check(roundTrip(t, tc.Object("default")), nil)
			if tc.SchemaError == "" {
				if len(errs) > 0 {
					t.Fatalf("the table says this object is admitted, but the schema refuses it: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("admitted; want an error containing %q", tc.SchemaError)
			}
			if got := errs.ToAggregate().Error(); !strings.Contains(got, tc.SchemaError) {
				t.Fatalf("error %q does not contain %q", got, tc.SchemaError)
			}
		})
	}
}

// exampleObjects are the custom resources under example/, which users apply
// as written, with the placeholders the original's walkthroughs fill in with
// sed filled in the same way.
func exampleObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	err := filepath.Walk(filepath.Join("..", "..", "example"), func(path string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() && path == filepath.Join("..", "..", "example", "chart", "templates") {
			return filepath.SkipDir // Helm templates, YAML only once rendered (test/manifests renders them)
		}
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		data = []byte(apitest.FillPlaceholders(string(data)))
		for i, doc := range bytes.Split(data, []byte("\n---")) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return err
			}
			if av, _ := obj["apiVersion"].(string); strings.HasPrefix(av, "etcd.database.coreos.com/") {
				out[path+"#"+string(rune('0'+i))] = obj
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSchemaAdmitsExamples(t *testing.T) {
	adm := admissions(t)
	examples := exampleObjects(t)
	for path, obj := range examples {
		t.Run(path, func(t *testing.T) {
			if errs := adm[obj["kind"].(string)].check(roundTrip(t, obj), nil); len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
		})
	}
}

func TestSchemaAllowsTLSSwitchedOnAndIssuedTLSSwitchedOff(t *testing.T) {
	adm := admissions(t)["EtcdCluster"]
	plain := map[string]any{"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster",
		"metadata": map[string]any{"name": "c"}, "spec": map[string]any{"size": 3}}
	secure := roundTrip(t, plain)
	secure["spec"].(map[string]any)["TLS"] = map[string]any{"static": map[string]any{
		"member":         map[string]any{"peerSecret": "p", "serverSecret": "s"},
		"operatorSecret": "o",
	}}
	peersOnly := roundTrip(t, plain)
	peersOnly["spec"].(map[string]any)["TLS"] = map[string]any{"static": map[string]any{
		"member": map[string]any{"peerSecret": "p"},
	}}
	resized := roundTrip(t, secure)
	resized["spec"].(map[string]any)["size"] = 5
	issued := roundTrip(t, plain)
	issued["spec"].(map[string]any)["TLS"] = map[string]any{"issued": map[string]any{}}
	otherCA := roundTrip(t, plain)
	otherCA["spec"].(map[string]any)["TLS"] = map[string]any{"issued": map[string]any{"caSecret": "another-ca"}}
	fromCertManager := roundTrip(t, plain)
	fromCertManager["spec"].(map[string]any)["TLS"] = map[string]any{"issued": map[string]any{"issuerRef": map[string]any{"name": "etcd-ca"}}}
	otherIssuer := roundTrip(t, plain)
	otherIssuer["spec"].(map[string]any)["TLS"] = map[string]any{"issued": map[string]any{"issuerRef": map[string]any{"name": "other-ca", "kind": "ClusterIssuer"}}}
	issuedResized := roundTrip(t, issued)
	issuedResized["spec"].(map[string]any)["size"] = 5
	const mode, ca = "between static and issued", "the CA of an existing cluster cannot be changed"
	tests := []struct {
		name     string
		old, new map[string]any
		refusal  string
	}{
		{"static TLS switched on", plain, secure, ""},
		{"issued TLS switched on", plain, issued, ""},
		{"issued TLS switched off", issued, plain, ""},
		{"static TLS switched off", secure, plain, api.StaticTLSSwitchedOffMessage},
		{"TLS of peers alone switched on", plain, peersOnly, api.TLSSwitchedOnPartlyMessage},
		{"TLS of clients dropped", secure, peersOnly, api.TLSOfPeersOrClientsChangedMessage},
		{"resizing a TLS cluster", secure, resized, ""},
		{"switching from static to issued TLS", secure, issued, mode},
		{"switching from issued to static TLS", issued, secure, mode},
		{"changing the CA secret", issued, otherCA, ca},
		{"resizing an issued TLS cluster", issued, issuedResized, ""},
		{"issued TLS from cert-manager switched on", plain, fromCertManager, ""},
		{"moving from the operator's CA to a cert-manager issuer", issued, fromCertManager, api.IssuerSwitchedMessage},
		{"moving from a cert-manager issuer to the operator's CA", fromCertManager, issued, api.IssuerSwitchedMessage},
		{"naming another cert-manager issuer", fromCertManager, otherIssuer, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := adm.check(roundTrip(t, tc.new), roundTrip(t, tc.old))
			if tc.refusal != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.refusal)) {
				t.Fatalf("want refusal, got %v", errs)
			}
			if tc.refusal == "" && len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
		})
	}
}

func TestManifestsMatchDefinitions(t *testing.T) {
	for _, crd := range All() {
		want, err := YAML(crd)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "example", "crd", FileName(crd))
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run hack/update-codegen.sh)", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s differs from the definition the operators install: run hack/update-codegen.sh", path)
		}
	}
}

func TestDefinitionNames(t *testing.T) {
	cluster := EtcdCluster()
	for crd, want := range map[*apiextv1.CustomResourceDefinition]string{cluster: "etcd,etcdclus", EtcdBackup(): "etcdbk", EtcdRestore(): "etcdrs"} {
		if got := strings.Join(crd.Spec.Names.ShortNames, ","); got != want {
			t.Errorf("%s short names %q, want %q", crd.Name, got, want)
		}
	}
	scale := cluster.Spec.Versions[0].Subresources.Scale
	if scale == nil || scale.SpecReplicasPath != ".spec.size" || scale.StatusReplicasPath != ".status.size" ||
		scale.LabelSelectorPath == nil || *scale.LabelSelectorPath != ".status.selector" {
		t.Errorf("EtcdCluster scale subresource %+v", scale)
	}
	for _, crd := range All() {
		v := crd.Spec.Versions[0]
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s has no status subresource", crd.Name)
		}
		if crd.Spec.Scope != apiextv1.NamespaceScoped {
			t.Errorf("%s is not namespaced", crd.Name)
		}
	}
}

func TestWithoutStatusSubresourceDropsOnlyTheStatusSubresource(t *testing.T) {
	for _, crd := range All() {
		t.Run(crd.Spec.Names.Kind, func(t *testing.T) {
			got := WithoutStatusSubresource(crd)
			newAdmission(t, got) // the apiserver accepts it
			if sub := got.Spec.Versions[0].Subresources; sub != nil && sub.Status != nil {
				t.Fatal("the status subresource is still served")
			}
			if crd.Spec.Versions[0].Subresources.Status == nil {
				t.Fatal("the definition handed in was changed")
			}
			// Everything else is the definition's: only the status subresource goes.
			want := crd.DeepCopy()
			want.Spec.Versions[0].Subresources.Status = nil
			if want.Spec.Versions[0].Subresources.Scale == nil {
				want.Spec.Versions[0].Subresources = nil
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("differs beyond the status subresource:\n%s", cmp.Diff(want, got))
			}
		})
	}
	scale := WithoutStatusSubresource(EtcdCluster()).Spec.Versions[0].Subresources
	if scale == nil || scale.Scale == nil || scale.Scale.StatusReplicasPath != ".status.size" {
		t.Errorf("EtcdCluster lost its scale subresource: %+v", scale)
	}
}

// kubectl explain shows a property's description; every field of the three
// kinds must have one (a doc comment on its Go field, or one in the schema).
func TestEveryPropertyIsDescribed(t *testing.T) {
	var s0 string
	var walk func(path string, s *apiextv1.JSONSchemaProps)
	walk = func(path string, s *apiextv1.JSONSchemaProps) {
		for name, p := range s.Properties {
			// The apiserver allows no description on metadata: kubectl
			// explain takes ObjectMeta's.
			if strings.TrimSpace(p.Description) == "" && !(path == s0 && name == "metadata") {
				t.Errorf("%s.%s has no description: document its Go field in pkg/apis and run hack/update-codegen.sh", path, name)
			}
			walk(path+"."+name, &p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(path+"[]", s.Items.Schema)
		}
	}
	for _, crd := range All() {
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		if root.Description == "" {
			t.Errorf("%s has no description", crd.Spec.Names.Kind)
		}
		s0 = crd.Spec.Names.Kind
		walk(s0, root)
	}
}
