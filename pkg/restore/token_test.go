package restore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestEnsureTokenDrawsOnceAndRefusesAPlantedSecret(t *testing.T) {
	ctx := context.Background()
	er := newRestore("r", "good.db", nil)
	kube := kubefake.NewSimpleClientset()
	first, err := ensureToken(ctx, kube.CoreV1(), er)
	if err != nil || len(first.value) != 2*tokenBytes || first.onRestore {
		t.Fatalf("token %+v, %v", first, err)
	}
	// A restarted operator gets the same token, so the seed's copy stays valid.
	again, err := ensureToken(ctx, kube.CoreV1(), er)
	if err != nil || !bytes.Equal(again.value, first.value) {
		t.Fatalf("second token %q (first %q), %v", again.value, first.value, err)
	}
	other := newRestore("r", "good.db", nil)
	other.UID = "another-restore"
	if s, _ := ensureToken(ctx, kube.CoreV1(), other); bytes.Equal(s.value, first.value) {
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

// forbidSecretCreate makes kube refuse to create Secrets, as the original's
// roles do (they grant only get).
func forbidSecretCreate(kube *kubefake.Clientset) {
	kube.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("the role grants secrets get only"))
	})
}

func TestATokenTheRoleMayNotPutInASecretIsKeptOnTheRestore(t *testing.T) {
	ctx := context.Background()
	er := newRestore("r", "good.db", nil)
	kube := kubefake.NewSimpleClientset()
	forbidSecretCreate(kube)
	tok, err := ensureToken(ctx, kube.CoreV1(), er)
	if err != nil || !tok.onRestore || len(tok.value) != 2*tokenBytes {
		t.Fatalf("token %+v, %v; want a fresh one to keep on the EtcdRestore", tok, err)
	}
	// Kept in the annotation, it is found again after a restart.
	er.Annotations = map[string]string{TokenAnnotation: string(tok.value)}
	again, err := tokenOf(ctx, kube.CoreV1(), er)
	if err != nil || !again.onRestore || !bytes.Equal(again.value, tok.value) {
		t.Fatalf("token read back %+v, %v", again, err)
	}
	// A Secret the restore owns comes first: the annotation is what anyone
	// who may edit the EtcdRestore may write.
	owned, err := newTokenSecret(er)
	if err != nil {
		t.Fatal(err)
	}
	withSecret := kubefake.NewSimpleClientset(owned)
	if got, err := tokenOf(ctx, withSecret.CoreV1(), er); err != nil || got.onRestore || !bytes.Equal(got.value, owned.Data[TokenKey]) {
		t.Fatalf("token %+v, %v; want the Secret's", got, err)
	}
	// Neither: NotFound, which the hand-over reports as a lost token.
	er.Annotations = nil
	if _, err := tokenOf(ctx, kubefake.NewSimpleClientset().CoreV1(), er); !apierrors.IsNotFound(err) {
		t.Fatalf("no Secret and no annotation: %v, want NotFound", err)
	}
}

func TestATokenKeptOnTheRestoreOpensTheBackupOnlyToTheSeedsAddress(t *testing.T) {
	er := newRestore("r", "good.db", nil)
	secretToken := restoreToken{value: []byte("in-a-secret")}
	keptToken := restoreToken{value: []byte("on-the-restore"), onRestore: true}
	for _, tc := range []struct {
		name   string
		token  restoreToken
		seedIP string // "" : the seed not seen yet
		from   string
		want   bool
	}{
		{"a Secret's token from anywhere", secretToken, "", "10.0.0.9", true},
		{"a kept token before the seed is seen", keptToken, "", "10.0.0.7", false},
		{"a kept token from the seed", keptToken, "10.0.0.7", "10.0.0.7", true},
		{"a kept token from another pod", keptToken, "10.0.0.7", "10.0.0.8", false},
		{"a kept token from an unknown address", keptToken, "10.0.0.7", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens := NewTokens()
			tokens.remember(er, tc.token)
			if tc.seedIP != "" {
				tokens.bindSeed(er, tc.seedIP)
			}
			// Each look at the restore remembers the token again: the seed's
			// address stays.
			tokens.remember(er, tc.token)
			_, _, ok := tokens.check(er.Namespace, er.Name, string(tc.token.value), tc.from)
			if ok != tc.want {
				t.Errorf("served %v, want %v", ok, tc.want)
			}
		})
	}
}
