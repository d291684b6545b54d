package cluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
)

// take records a version of the object, from the informer or from the
// server's answer to a status write, and tells whether it calls for a pass.
//
// A spec is new when its generation is one not looked at yet, whatever object
// brought it: the status writer may have read the user's edit on a conflict
// before the informer delivers it, and comparing with the last object seen
// would then drop the edit (a lost `paused: true`, or the restore
// operator's unpause).
func (c *Cluster) take(cl *api.EtcdCluster) bool {
	prev := c.latest
	if prev != nil && prev.UID != "" && cl.UID != prev.UID {
		// The cluster was deleted and created again under the same name, and
		// the controller missed the deletion: nothing known about the old
		// one holds for the new one.
		c.log.Infof("cluster was re-created (uid %s, was %s); starting over", cl.UID, prev.UID)
		c.startOver()
		prev = nil
	}
	c.latest = cl
	pass := prev == nil
	if prev != nil && !equality.Semantic.DeepEqual(cl.Status, prev.Status) {
		// Someone else wrote the status: the restore operator's hand-over
		// sets the phase; anything else is overwritten by the next pass.
		// A status kept in memory gives way to it, as it would have been
		// overwritten by it had it been stored.
		c.unstored = nil
		pass = true
	}
	switch {
	case c.isNewSpec(cl):
		c.acceptSpec(cl)
		pass = true
	case c.spec != nil && c.spec != cl && cl.UID == c.spec.UID && cl.Generation == c.spec.Generation &&
		equality.Semantic.DeepEqual(cl.Spec, c.spec.Spec):
		// The spec in force came in a newer object (after a status
		// write, say): keep that one, which the informer's cache holds
		// anyway, rather than a second object per cluster. Of the spec in
		// force only its spec, name, namespace, UID and generation are
		// read, all the same in both.
		c.spec = cl
	}
	return pass
}

func (c *Cluster) isNewSpec(cl *api.EtcdCluster) bool {
	if c.spec == nil && c.specSeen == 0 {
		return true
	}
	if cl.Generation != 0 || c.specSeen != 0 {
		return cl.Generation != c.specSeen
	}
	// Objects without a generation (never stored) are compared by spec.
	return c.spec == nil || !equality.Semantic.DeepEqual(cl.Spec, c.spec.Spec)
}

// acceptSpec puts a new spec in force if it is valid. An invalid spec is
// reported (see specInForce) and ignored: a cluster that never had a valid
// spec waits, a running one keeps its last valid spec (the original only
// logged, so users never learned why their edit had no effect).
func (c *Cluster) acceptSpec(cl *api.EtcdCluster) {
	c.specSeen = cl.Generation
	if c.validate(cl) != nil {
		return
	}
	if c.spec != nil && c.spec.Spec.Paused != cl.Spec.Paused {
		c.log.Infof("spec.paused is now %v", cl.Spec.Paused)
	}
	if v, err := etcdversion.Parse(cl.WithDefaults().Spec.Version); err == nil && v.UpgradeAwayAdvice() != "" &&
		(c.spec == nil || etcdversion.Normalize(c.spec.WithDefaults().Spec.Version) != v.String()) {
		// Said once per version put in force, not at every pass: the
		// cluster runs as asked.
		c.tell(corev1.EventTypeWarning, eventVersionNoLongerFixed, v.UpgradeAwayAdvice())
	}
	c.spec = cl
}

// validate judges a spec without its reserved pod.etcdEnv variables: those
// are refused at admission, and one that got past it (a CRD older than the
// rule, a spec stored before it) is left out of every pod and reported by
// reservedEnvProblem, rather than leaving a running cluster unmanaged.
func (c *Cluster) validate(cl *api.EtcdCluster) error {
	cl = cl.WithoutReservedEtcdEnv()
	if c.spec == nil {
		return cl.Validate()
	}
	return cl.ValidateUpdate(c.spec.WithoutReservedEtcdEnv())
}

// reservedEnvProblem reports the reserved pod.etcdEnv variables of the
// newest spec, which no member is given.
func reservedEnvProblem(cl *api.EtcdCluster) *problem {
	names := cl.ReservedEtcdEnvIn()
	if len(names) == 0 {
		return nil
	}
	p := newProblem(problemInvalidSpec, "spec.pod.etcdEnv %s ignored: %s",
		strings.Join(names, ", "), api.ReservedEtcdEnvMessage)
	return &p
}

// specInForce is the spec the pass works on, with defaults filled in memory
// only (defaults are never written back to the user's object), and the
// problems of the newest spec: why it is not in force, and what of it is
// ignored.
func (c *Cluster) specInForce() (*api.EtcdCluster, []problem) {
	var inForce *api.EtcdCluster
	if c.spec != nil {
		inForce = c.spec.WithDefaults()
	}
	var problems []problem
	if p := reservedEnvProblem(c.latest); p != nil {
		problems = append(problems, *p)
	}
	if c.spec != nil && c.spec.Generation == c.latest.Generation && c.spec.UID == c.latest.UID {
		return inForce, problems
	}
	err := c.validate(c.latest)
	if err == nil {
		return inForce, problems
	}
	what := "invalid spec: the cluster is not created until it is fixed"
	if c.spec != nil {
		what = fmt.Sprintf("invalid spec update ignored, still reconciling generation %d", c.spec.Generation)
	}
	return inForce, append([]problem{newProblem(problemInvalidSpec, "%s: %v", what, err)}, problems...)
}

// startOver forgets everything learnt about a previous object of the name.
func (c *Cluster) startOver() {
	c.latest, c.spec, c.specSeen = nil, nil, 0
	c.unstored = nil
	c.knownMembership.forget()
	c.tlsConfig = nil
	c.certs = certCache{}
	c.podExpect, c.upgradeExpect, c.failedUpgrade = nil, nil, nil
}
