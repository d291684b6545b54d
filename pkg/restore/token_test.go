package restore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	kubefake "k8s.io/client-go/kubernetes/fake"
)

func TestEnsureTokenDrawsOnceAndRefusesAPlantedSecret(t *testing.T) {
	ctx := context.Background()
	er := newRestore("r", "good.db", nil)
	kube := kubefake.NewSimpleClientset()
	first, err := ensureToken(ctx, kube.CoreV1(), er)
	if err != nil || len(first) != 2*tokenBytes {
		t.Fatalf("token %q, %v", first, err)
	}
	// A restarted operator gets the same token, so the seed's copy stays valid.
	again, err := ensureToken(ctx, kube.CoreV1(), er)
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("second token %q (first %q), %v", again, first, err)
	}
	other := newRestore("r", "good.db", nil)
	other.UID = "another-restore"
	if s, _ := ensureToken(ctx, kube.CoreV1(), other); bytes.Equal(s, first) {
		t.Fatal("two restores share a token")
	}

	planted, err := newTokenSecret(er)
	if err != nil {
		t.Fatal(err)
	}
	planted.OwnerReferences = nil
	if _, err := ensureToken(ctx, kubefake.NewSimpleClientset(planted).CoreV1(), er); !errors.Is(err, errTokenNotOwned) {
		t.Fatalf("a Secret the restore does not own was used: %v", err)
	}
}
