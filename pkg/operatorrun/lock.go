package operatorrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LockKind is the kind of object the leader election is held on.
type LockKind string

const (
	// LockLease is the default: a coordination.k8s.io/v1 Lease.
	LockLease LockKind = "Lease"
	// LockEndpoints is the original's lock: an annotation on a core/v1
	// Endpoints object. It is used alone only when the role grants endpoints
	// but not leases, as the original's roles do, so that installs of the
	// original keep electing a leader without a new rule.
	LockEndpoints LockKind = "Endpoints"
	// LockBoth is the Endpoints record and the Lease held together, when the
	// role grants both: see bothLocks.
	LockBoth LockKind = "Endpoints and Lease"
)

// lockVerbs are what client-go's elector does to its lock object.
var lockVerbs = []string{"get", "create", "update"}

// LockChoice is what the access review decided.
type LockChoice struct {
	// Kind is empty when neither lock may be used.
	Kind LockKind
	// YieldTo is, when Kind is one kind only, the other kind if the role lets
	// it be read: a live record of it naming another holder keeps this
	// replica from leading (see yieldingLock).
	YieldTo LockKind
	// Why says, for the log and the event, why this lock was chosen, or
	// which rule is missing when none was.
	Why string
}

// Rule is an RBAC rule, as it would be written in a Role, that the operator
// needs.
type Rule struct {
	Group     string
	Resource  string
	Verbs     []string
	Namespace string
}

// String is the rule as a user adds it to a Role, plus where it applies.
func (r Rule) String() string {
	where := "in namespace " + r.Namespace
	if r.Namespace == "" {
		where = "in a ClusterRole"
	}
	return fmt.Sprintf(`{apiGroups: [%q], resources: [%q], verbs: [%s]} %s`,
		r.Group, r.Resource, quoteAll(r.Verbs), where)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Missing returns the verbs of r that the operator's service account may not
// use, asking the apiserver with SelfSubjectAccessReviews, which every
// authenticated user may create. An error means the apiserver could not say.
//
// A rule on a subresource (etcdclusters/status) is asked as the apiserver
// authorizes a request to it, resource and subresource apart, so that a
// role's "*/status" counts as RBAC counts it.
func Missing(ctx context.Context, kube kubernetes.Interface, r Rule) ([]string, error) {
	resource, subresource, _ := strings.Cut(r.Resource, "/")
	var missing []string
	for _, verb := range r.Verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: r.Namespace, Verb: verb, Group: r.Group,
				Resource: resource, Subresource: subresource},
		}}
		out, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask whether %s %s may be used: %w", verb, r.Resource, err)
		}
		if !out.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	return missing, nil
}

// LeaseRule and EndpointsRule are the rules each lock needs in ns.
func LeaseRule(ns string) Rule {
	return Rule{Group: "coordination.k8s.io", Resource: "leases", Verbs: lockVerbs, Namespace: ns}
}

// EndpointsRule is the rule the Endpoints lock needs in ns.
func EndpointsRule(ns string) Rule {
	return Rule{Group: "", Resource: "endpoints", Verbs: lockVerbs, Namespace: ns}
}

// EndpointsReadRule is what yielding to the Endpoints record needs in ns. The
// published roles grant it beside LeaseRule, so that a replica on the Lease
// does not lead while an original etcd-operator holds the Endpoints record.
func EndpointsReadRule(ns string) Rule {
	return Rule{Group: "", Resource: "endpoints", Verbs: []string{"get"}, Namespace: ns}
}

// ChooseLock decides, once at start, which lock the election uses: both the
// Endpoints record and the Lease when the role allows both, else the one it
// allows, yielding to a live record of the other kind when the role lets that
// be read. Every replica under the same role makes the same choice, so they
// all contend for the same objects; replicas under different roles (during a
// rolling update that changes the role, or an original etcd-operator beside
// ours) are kept apart by holding both or by yielding. An error means the
// apiserver could not answer and the question should be asked again.
func ChooseLock(ctx context.Context, kube kubernetes.Interface, ns string) (LockChoice, error) {
	leases, err := Missing(ctx, kube, LeaseRule(ns))
	if err != nil {
		return LockChoice{}, err
	}
	endpoints, err := Missing(ctx, kube, EndpointsRule(ns))
	if err != nil {
		return LockChoice{}, err
	}
	switch {
	case len(leases) == 0 && len(endpoints) == 0:
		return LockChoice{Kind: LockBoth, Why: "the role grants leases and endpoints: both are held, so that neither an original etcd-operator " +
			"nor a replica holding only one of them leads beside this one"}, nil
	case len(leases) == 0:
		c := LockChoice{Kind: LockLease, Why: "the role grants leases"}
		if slices.Contains(endpoints, "get") {
			// Without a read of endpoints an original etcd-operator, or a
			// replica whose role allows endpoints only, is not seen: the two
			// may lead at once. Every role this project publishes grants the
			// read.
			c.Why += fmt.Sprintf(" but may not get endpoints: an original etcd-operator leading on the Endpoints record is not seen, so make sure none runs beside this one; "+
				"add get on endpoints to wait for it, or %s endpoints to hold both", strings.Join(endpoints, ", "))
			return c, nil
		}
		c.YieldTo = LockEndpoints
		c.Why += fmt.Sprintf(" and a read of endpoints: this replica does not lead while a live Endpoints record names another holder (an original etcd-operator); "+
			"add %s endpoints to hold both, which also keeps an original from leading beside this one", strings.Join(endpoints, ", "))
		return c, nil
	case len(endpoints) == 0:
		c := LockChoice{Kind: LockEndpoints, Why: fmt.Sprintf(
			"the role grants endpoints but not %s leases (as the original's roles do); add %s to use a Lease",
			strings.Join(leases, ", "), LeaseRule(ns))}
		// Without a read of leases (the original's roles) a replica holding
		// the Lease alone is not seen. It waits for this one in turn if its
		// role lets it read endpoints, as the published roles do; if neither
		// may read the other's kind, the two may lead at once.
		if !slices.Contains(leases, "get") {
			c.YieldTo = LockLease
			c.Why += "; meanwhile this replica does not lead while a live Lease names another holder"
		}
		return c, nil
	}
	return LockChoice{Why: fmt.Sprintf(
		"the role may not %s leases nor %s endpoints in namespace %s, so no leader can be elected: add the rule %s",
		strings.Join(leases, ", "), strings.Join(endpoints, ", "), ns, LeaseRule(ns))}, nil
}

// EndpointsLock is the original's leader-election lock, which client-go no
// longer has: the election record, as JSON, in the annotation
// control-plane.alpha.kubernetes.io/leader of an Endpoints object. An
// original operator still running during a migration reads and honours the
// same record, so the two never lead at once.
type EndpointsLock struct {
	Namespace  string
	Name       string
	Client     typedcorev1.EndpointsGetter
	LockConfig resourcelock.ResourceLockConfig

	e *corev1.Endpoints
}

var _ resourcelock.Interface = (*EndpointsLock)(nil)

// Get returns the election record in the annotation; an Endpoints object
// without it has an empty record, which anyone may take.
func (l *EndpointsLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	e, err := l.Client.Endpoints(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.e = e
	var rec resourcelock.LeaderElectionRecord
	raw := []byte(e.Annotations[resourcelock.LeaderElectionRecordAnnotationKey])
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, nil, fmt.Errorf("the annotation %s of Endpoints %s: %w", resourcelock.LeaderElectionRecordAnnotationKey, l.Describe(), err)
		}
	}
	return &rec, raw, nil
}

// Create makes the Endpoints object with the record.
func (l *EndpointsLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	l.e, err = l.Client.Endpoints(l.Namespace).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{
		Namespace:   l.Namespace,
		Name:        l.Name,
		Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: string(raw)},
	}}, metav1.CreateOptions{})
	return err
}

// Update writes the record over the object last read; a conflict means
// someone else wrote it since, and the elector reads it again.
func (l *EndpointsLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if l.e == nil {
		return errors.New("endpoints lock not initialized, call get or create first")
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	e := l.e.DeepCopy()
	if e.Annotations == nil {
		e.Annotations = map[string]string{}
	}
	e.Annotations[resourcelock.LeaderElectionRecordAnnotationKey] = string(raw)
	out, err := l.Client.Endpoints(l.Namespace).Update(ctx, e, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.e = out
	return nil
}

// RecordEvent records the elector's events on the Endpoints object.
func (l *EndpointsLock) RecordEvent(s string) {
	if l.LockConfig.EventRecorder == nil || l.e == nil {
		return
	}
	subject := &corev1.Endpoints{ObjectMeta: l.e.ObjectMeta}
	subject.Kind, subject.APIVersion = "Endpoints", "v1"
	l.LockConfig.EventRecorder.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%v %v", l.LockConfig.Identity, s)
}

// Describe is namespace/name.
func (l *EndpointsLock) Describe() string { return l.Namespace + "/" + l.Name }

// Identity is the contender's identity.
func (l *EndpointsLock) Identity() string { return l.LockConfig.Identity }
