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
	"sync"

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
// plan whose signature it checks; it keeps the tokens in memory (Tokens), so that
// it checks a request before it asks the API server anything.
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
	// TokenAnnotation on an EtcdRestore holds its token when the role may not
	// create Secrets (the original's grants only get): see tokenOf.
	TokenAnnotation = "etcd.database.coreos.com/restore-token"
	// TokenEnv is the variable of the seed's fetch step that holds a token
	// kept in TokenAnnotation.
	TokenEnv = "ETCD_RESTORE_TOKEN"
)

// restoreToken is a restore's token and where it is kept. A token in a
// Secret is known to the restore operator, the seed's fetch step and whoever
// may read the namespace's Secrets. One kept on the EtcdRestore (a role that
// may not create Secrets) is known to whoever may read the EtcdRestore or the
// seed pod, so the backup server also requires such a token to come from the
// seed pod's address (Tokens.bindSeed).
type restoreToken struct {
	value []byte
	// onRestore: kept in TokenAnnotation, handed to the seed in TokenEnv.
	onRestore bool
}

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
// When the role may not create Secrets, a fresh token is returned with
// onRestore set: the caller keeps it in TokenAnnotation, with the plan it signs.
func ensureToken(ctx context.Context, secrets corev1client.SecretsGetter, er *api.EtcdRestore) (restoreToken, error) {
	tok, err := tokenOf(ctx, secrets, er)
	if err == nil || !apierrors.IsNotFound(err) {
		return tok, err
	}
	want, err := newTokenSecret(er)
	if err != nil {
		return restoreToken{}, err
	}
	got, err := secrets.Secrets(er.Namespace).Create(ctx, want, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return tokenOf(ctx, secrets, er)
	case apierrors.IsForbidden(err):
		return restoreToken{value: want.Data[TokenKey], onRestore: true}, nil
	case err != nil:
		return restoreToken{}, fmt.Errorf("create Secret %s/%s for the restore's token: %w", er.Namespace, want.Name, err)
	}
	return restoreToken{value: got.Data[TokenKey]}, nil
}

// tokenOf reads the token of er: from the Secret er owns, else from
// TokenAnnotation. The Secret comes first: whoever may edit the EtcdRestore
// may write the annotation, and a token of theirs would not verify the plan
// the restore operator signed anyway. A NotFound error means neither exists.
func tokenOf(ctx context.Context, secrets corev1client.SecretsGetter, er *api.EtcdRestore) (restoreToken, error) {
	tok, err := readToken(ctx, secrets, er)
	if err == nil {
		return restoreToken{value: tok}, nil
	}
	if kept := er.Annotations[TokenAnnotation]; kept != "" && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) {
		return restoreToken{value: []byte(kept), onRestore: true}, nil
	}
	return restoreToken{}, err
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

// Tokens are the tokens of the restores this process runs, kept in memory for
// the backup server: it checks a request's token before it makes any API call,
// so a request without a restore's token costs nothing but a map lookup and
// learns nothing. The flow tells it each token as it creates or reads the
// restore's Secret (it reads it on every look at a restore in progress) and
// forgets it when the restore ends or goes; the entries are a copy of the
// Secrets, never state the flow acts on.
//
// A restarted operator has forgotten them all, and it must not fall back to
// reading the API for a token it does not know: that is what any pod could make
// it do, and how long the answer takes would tell whether the restore exists.
// Instead LoadTokens reads the tokens of the restores in progress once, at
// start, before the operator is ready; the seeds reach the backup server only
// through its Service, which sends them to ready pods only, and until then they
// retry their connection. The tokens are random, not derived from a key of the
// process, for the same reason: a seed's token must stay valid across the
// operator's restarts and changes of leader.
type Tokens struct {
	mu     sync.RWMutex
	known  map[string]knownToken // by "namespace/name"
	absent []byte                // compared with when no restore of the name is known
}

type knownToken struct {
	uid   types.UID
	token []byte
	// seedBound: the token is served only to seedIP, the address of the
	// restore's seed pod as the flow last saw it ("" until then).
	seedBound bool
	seedIP    string
}

// NewTokens knows no token yet.
func NewTokens() *Tokens {
	absent := make([]byte, tokenBytes)
	_, _ = rand.Read(absent)
	return &Tokens{known: map[string]knownToken{}, absent: []byte(hex.EncodeToString(absent))}
}

func tokenKey(namespace, name string) string { return namespace + "/" + name }

// remember keeps er's token, read from or written to the Secret er owns or
// its TokenAnnotation.
func (t *Tokens) remember(er *api.EtcdRestore, tok restoreToken) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tokenKey(er.Namespace, er.Name)
	prev := t.known[k]
	next := knownToken{uid: er.UID, token: tok.value, seedBound: tok.onRestore}
	if prev.uid == er.UID {
		next.seedIP = prev.seedIP
	}
	t.known[k] = next
}

// bindSeed records the address of er's seed pod, the only one a token kept on
// the EtcdRestore is served to.
func (t *Tokens) bindSeed(er *api.EtcdRestore, ip string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tokenKey(er.Namespace, er.Name)
	if cur, ok := t.known[k]; ok && cur.uid == er.UID {
		cur.seedIP = ip
		t.known[k] = cur
	}
}

// forget drops the token of the restore namespace/name; with a uid, only if
// it is that restore's (and not its successor's under the same name).
func (t *Tokens) forget(namespace, name string, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tokenKey(namespace, name)
	if uid == "" || t.known[k].uid == uid {
		delete(t.known, k)
	}
}

// check tells whether presented is the token of the restore namespace/name,
// shown from address from (for a token kept on the EtcdRestore, it must be
// the seed pod's), and if so which restore (its UID) and the token, which
// signs its plan. It takes as long whether or not the restore is known: the
// comparison runs against a random token when it is not.
func (t *Tokens) check(namespace, name, presented, from string) (types.UID, []byte, bool) {
	if t == nil {
		return "", nil, false
	}
	t.mu.RLock()
	k, ok := t.known[tokenKey(namespace, name)]
	t.mu.RUnlock()
	want := k.token
	if !ok {
		want = t.absent
	}
	matches := tokenMatches(presented, want)
	if !matches || !ok || k.seedBound && (k.seedIP == "" || k.seedIP != from) {
		return "", nil, false
	}
	return k.uid, k.token, true
}
