package cluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Adoption: a cluster that coreos/etcd-operator v0.9.4 made and ran, found
// by this operator once the original is stopped. Its pods, services and
// claims carry the original's owner reference to the EtcdCluster, so they
// are the cluster's objects here too; its members run etcd with restart
// policy Never, on emptyDir data by default, with no readiness over HTTP,
// no wait-membership container, and the original's busybox check-dns.
//
// Every step of the ladder after this one judges pods by this operator's
// layout: a member whose pod ended is replaced (on an emptyDir its data is
// gone), a pod on another image is patched, a pod not in the membership is
// deleted. On adopted members each of these would restart, delete or
// replace a member that this operator did not make and whose failure modes
// it has not checked. So while a cluster has a pod of the original's layout
// ("adopted, not converted"), adoptedFromTheOriginal decides every pass:
// it reads the membership from etcd through the existing Services, tells
// once what was adopted, and otherwise only waits and says what it holds
// back, unless spec.adoption.convert asks for the members to be moved to
// this operator's layout (conversion.go).

const (
	// eventAdoptedFromTheOriginal names the members adopted, once per
	// operator start.
	eventAdoptedFromTheOriginal = "AdoptedFromTheOriginal"
	// eventConvertedInPlace tells a member the original made on a claim
	// restarted on it in this operator's layout.
	eventConvertedInPlace = "ConvertedInPlace"
)

// adoptionView is what a pass sees of a cluster with pods of the original's
// layout; nil in a snapshot of a cluster without any.
type adoptionView struct {
	// pods are the names of the pods of the original's layout, live or
	// terminating, sorted.
	pods []string
	// refused says why the cluster cannot be adopted safely, one sentence
	// per pod or cause; empty when it can.
	refused []string
	// announced is set once the adoption was told in this operator's run.
	announced bool
}

// adoptionOf finds the pods of the original's layout in a snapshot and
// judges, from the spec in force, whether each can be adopted as it is.
// Pods of neither layout in such a cluster are refused too: nothing is
// known of how they run.
func adoptionOf(s *snapshot) *adoptionView {
	var original, other []string
	all := map[string]*corev1.Pod{}
	for name, p := range s.pods {
		all[name] = p
	}
	for name, p := range s.terminating {
		all[name] = p
	}
	for _, name := range sortedKeys(all) {
		if k8sutil.IsOriginalPod(all[name]) {
			original = append(original, name)
		} else {
			other = append(other, name)
		}
	}
	if len(original) == 0 {
		return nil
	}
	v := &adoptionView{pods: original, announced: s.adoptionAnnounced}
	tmpl := memberTemplate(s.spec)
	for _, name := range original {
		m := tmpl
		m.Name = name
		if why := k8sutil.OriginalLayoutProblem(all[name], m.PeerURL(), m.ClientURL(), m.SecurePeer, m.SecureClient); why != "" {
			v.refused = append(v.refused, why)
		}
	}
	for _, name := range other {
		if !k8sutil.IsMadeByOperator(all[name]) {
			v.refused = append(v.refused, fmt.Sprintf("pod %s has a layout of neither operator", name))
		}
	}
	return v
}

// adoptedFromTheOriginal is step 3b of decide: it decides every pass of a
// cluster with pods of the original's layout, and never changes a member.
func adoptedFromTheOriginal(s *snapshot) (action, bool) {
	v := s.adoption
	if v == nil {
		return action{}, false
	}
	if len(v.refused) > 0 {
		return waiting("not adopted: " + strings.Join(v.refused, "; ")), true
	}
	if s.membership == nil {
		if s.etcd != nil && s.etcd.err != nil {
			return waiting("not adopted yet: the members the original made do not answer; nothing is changed until they do"), true
		}
		return readEtcd("read the membership of the members the original made"), true
	}
	if !v.announced {
		return action{kind: actAnnounceAdoption, reason: strings.Join(s.membership.Names(), ", ")}, true
	}
	if converts(s) {
		return convertAdopted(s)
	}
	if held := adoptionHolds(s); len(held) > 0 {
		return waiting("adopted members are kept as they are: " + strings.Join(held, "; ")), true
	}
	return action{kind: actIdle}, true
}

// converts tells whether the spec asks for the adopted members to be
// converted (conversion.go).
func converts(s *snapshot) bool {
	a := s.spec.Spec.Adoption
	return a != nil && a.Convert
}

// adoptionHolds says what the operator would otherwise do to an adopted
// cluster and holds back until its members are converted.
func adoptionHolds(s *snapshot) []string {
	var held []string
	names := s.membership.Names()
	for _, name := range names {
		pod := s.pods[name]
		switch {
		case pod == nil && s.terminating[name] != nil:
			held = append(held, fmt.Sprintf("the pod of member %s is being deleted; it is not replaced", name))
		case pod == nil:
			held = append(held, fmt.Sprintf("member %s has no pod; it is not replaced", name))
		case pod.Status.Phase != corev1.PodRunning:
			held = append(held, fmt.Sprintf("the pod of member %s is %s; it is not restarted or replaced", name, pod.Status.Phase))
		}
	}
	for _, name := range sortedKeys(s.pods) {
		if s.membership[name] == nil {
			held = append(held, fmt.Sprintf("pod %s is no member of etcd; it is not deleted", name))
		}
	}
	if size := s.spec.Spec.Size; size != len(names) {
		held = append(held, fmt.Sprintf("spec.size is %d and etcd has %d members; the cluster is not resized", size, len(names)))
	}
	if want, other := podsOffSpecVersion(s); len(other) > 0 {
		held = append(held, fmt.Sprintf("spec.version asks for %s and members run other versions (%s); they are not upgraded", want, strings.Join(other, ", ")))
	}
	return held
}

// podsOffSpecVersion is the version spec.version asks for, and the pods
// that run another, as "<pod> on <version>".
func podsOffSpecVersion(s *snapshot) (want string, other []string) {
	want = etcdversion.Normalize(s.spec.Spec.Version)
	for _, name := range sortedKeys(s.pods) {
		if v := podVersion(s.pods[name]); v != want {
			other = append(other, fmt.Sprintf("%s on %s", name, displayVersion(v)))
		}
	}
	return want, other
}

// adoptionProblems are the problems of an adopted cluster, for assess:
// what could not be adopted, and what is held back.
func adoptionProblems(s *snapshot) []problem {
	v := s.adoption
	switch {
	case v == nil:
		return nil
	case len(v.refused) > 0:
		return []problem{newProblem(problemAdoptionRefused, "the pods coreos/etcd-operator made are left as they are, not adopted: %s", strings.Join(v.refused, "; "))}
	case s.membership == nil && s.etcd != nil && s.etcd.err != nil:
		return []problem{newProblem(problemAdoptionRefused, "the members coreos/etcd-operator made do not answer; they are left as they are, not adopted, until they do")}
	case s.membership == nil:
		return nil
	}
	if converts(s) {
		if held := conversionHolds(s); len(held) > 0 {
			return []problem{newProblem(problemAdoptedMembersHeld, "members adopted from coreos/etcd-operator are not converted while %s", strings.Join(held, "; "))}
		}
		return nil
	}
	if held := adoptionHolds(s); len(held) > 0 {
		return []problem{newProblem(problemAdoptedMembersHeld, "members adopted from coreos/etcd-operator are kept as they are until they are converted: %s", strings.Join(held, "; "))}
	}
	return nil
}

// announceAdoption tells which members were adopted, and records the
// cluster Running.
func (c *Cluster) announceAdoption(s *snapshot) outcome {
	var members []string
	for _, name := range s.membership.Names() {
		members = append(members, fmt.Sprintf("%s (ID %x)", name, s.membership[name].ID))
	}
	c.adoptionAnnounced = true
	c.log.WithField("members", strings.Join(s.membership.Names(), ",")).Info("adopted the members coreos/etcd-operator made, as they run")
	c.tell(corev1.EventTypeNormal, eventAdoptedFromTheOriginal, fmt.Sprintf(
		"Adopted %d members coreos/etcd-operator made, as they run, without restarting any: %s; their pods are kept as they are",
		len(members), strings.Join(members, ", ")))
	return outcome{phase: api.ClusterPhaseRunning}
}
