package cluster

import "testing"

func TestVocabularyDescribesEveryProblem(t *testing.T) {
	ps := Problems()
	if len(ps) != len(problemKinds) {
		t.Fatalf("Problems() lists %d problems, problemKinds has %d", len(ps), len(problemKinds))
	}
	for k, info := range problemKinds {
		if problemWhen[k] == "" {
			t.Errorf("problem %s (%s) has no description in problemWhen (vocabulary.go)", info.event, info.code)
		}
	}
	seen := map[string]bool{}
	for _, c := range Conditions() {
		key := c.Type + "/" + c.Status + "/" + c.Reason
		if seen[key] {
			t.Errorf("condition %s listed twice", key)
		}
		seen[key] = true
	}
}
