package restore

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The per-restore secret. Without it the backup server on port 19999 would hand
// the snapshot of a restore in progress to any pod that asks, and whoever may
// edit an EtcdRestore could rewrite its plan annotation to have the server
// stream another object of the bucket with the restore's credentials. The
// restore operator creates a random token in a Secret owned by the EtcdRestore
// (so it goes with it), mounts it into the seed's fetch step, which presents it
// to the server, and signs the plan with it (an HMAC in PlanMACAnnotation). The
// server serves only requests that carry the token, and only the object of a
// plan whose signature it checks.
const (
	// TokenKey is the Secret's key holding the token.
	TokenKey = "token"
	// PlanMACAnnotation is the hex HMAC-SHA256 of PlanAnnotation's value under
	// the restore's token.
	PlanMACAnnotation = "etcd.database.coreos.com/restore-plan-mac"
	// tokenBytes of randomness: 256 bits, beyond guessing.
	tokenBytes = 32
	// tokenMountDir is where the seed's fetch step finds the token.
	tokenMountDir  = "/var/run/secrets/etcd-restore"
	tokenVolume    = "restore-token"
	tokenFile      = tokenMountDir + "/" + TokenKey
	bearerPrefix   = "Bearer "
	tokenSecretPre = "etcd-restore-token-"
)

// TokenSecretName is the Secret of the restore with this UID. The UID, not the
// restore's name, names it: a restore deleted and created again under the same
// name never finds its predecessor's token (which garbage collection may not
// have removed yet).
func TokenSecretName(restoreUID types.UID) string {
	return tokenSecretPre + string(restoreUID)
}

// errTokenNotOwned: a Secret of the token's name exists but does not belong to
// the restore; someone made it to plant a token they know.
var errTokenNotOwned = errors.New("is not owned by the EtcdRestore")

// newTokenSecret holds a fresh random token, owned by er.
func newTokenSecret(er *api.EtcdRestore) (*corev1.Secret, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("draw the restore's token: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      TokenSecretName(er.UID),
			Namespace: er.Namespace,
			Labels:    map[string]string{"app": "etcd-restore", "etcd_restore": er.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: api.SchemeGroupVersion.String(),
				Kind:       api.EtcdRestoreResourceKind,
				Name:       er.Name,
				UID:        er.UID,
				Controller: new(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{TokenKey: []byte(hex.EncodeToString(b))},
	}, nil
}

// ensureToken returns the restore's token, creating its Secret the first time.
// A restarted operator finds the Secret it created before and uses that token.
func ensureToken(ctx context.Context, secrets corev1client.SecretsGetter, er *api.EtcdRestore) ([]byte, error) {
	tok, err := readToken(ctx, secrets, er)
	if err == nil || !apierrors.IsNotFound(err) {
		return tok, err
	}
	want, err := newTokenSecret(er)
	if err != nil {
		return nil, err
	}
	got, err := secrets.Secrets(er.Namespace).Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return readToken(ctx, secrets, er)
	}
	if err != nil {
		return nil, fmt.Errorf("create Secret %s/%s for the restore's token: %w", er.Namespace, want.Name, err)
	}
	return got.Data[TokenKey], nil
}

// readToken reads the token of er, refusing a Secret er does not own.
func readToken(ctx context.Context, secrets corev1client.SecretsGetter, er *api.EtcdRestore) ([]byte, error) {
	name := TokenSecretName(er.UID)
	s, err := secrets.Secrets(er.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get Secret %s/%s with the restore's token: %w", er.Namespace, name, err)
	}
	owned := false
	for _, o := range s.OwnerReferences {
		if o.UID == er.UID {
			owned = true
		}
	}
	if !owned {
		return nil, fmt.Errorf("Secret %s/%s %w %s", er.Namespace, name, errTokenNotOwned, er.Name)
	}
	tok := s.Data[TokenKey]
	if len(tok) == 0 {
		return nil, fmt.Errorf("Secret %s/%s has no %q", er.Namespace, name, TokenKey)
	}
	return tok, nil
}

// planMAC signs the plan annotation's value.
func planMAC(token []byte, rawPlan string) string {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(rawPlan))
	return hex.EncodeToString(m.Sum(nil))
}

// verifiedPlan reads er's plan only if its signature is the token's.
func verifiedPlan(er *api.EtcdRestore, token []byte) (*Plan, error) {
	raw, ok := er.Annotations[PlanAnnotation]
	if !ok {
		return nil, fmt.Errorf("no annotation %s", PlanAnnotation)
	}
	mac, err := hex.DecodeString(er.Annotations[PlanMACAnnotation])
	if err != nil || len(mac) == 0 {
		return nil, fmt.Errorf("annotation %s is missing or not hex", PlanMACAnnotation)
	}
	want, _ := hex.DecodeString(planMAC(token, raw))
	if !hmac.Equal(mac, want) {
		return nil, fmt.Errorf("annotation %s does not match annotation %s: the plan was changed by someone other than the restore operator", PlanMACAnnotation, PlanAnnotation)
	}
	p, _, err := PlanOf(er)
	return p, err
}

// tokenMatches compares in constant time. Both sides are hashed first, so that
// not even the token's length shows in the time taken.
func tokenMatches(presented string, token []byte) bool {
	a := sha256.Sum256([]byte(presented))
	b := sha256.Sum256(token)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
