package cluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// This file switches TLS on (or off) in a running cluster, one member at a
// time, without a moment when two members cannot talk to each other or a
// client of the scheme in use is refused. A member is in one of four
// stages, read from its pod's etcd flags (never from the operator's
// memory), and moves one stage at a time; members in adjacent stages can
// always talk:
//
//	plain:         peers and clients http, no certificate;
//	certificates:  peers still listen and advertise http, but the member
//	               holds the peer certificates, so that it can dial a peer
//	               that listens https; clients are served http and https on
//	               the one client port (etcd tells them apart);
//	peers secure:  the member's peer URL is https in etcd, and it listens
//	               https; clients still both;
//	secure:        clients https alone: TLS is on.
//
// Switching on moves the members of the lowest stage up one; switching off
// moves the members of the highest stage down one. A member moves by a
// restart (its pod deleted: on its claim, the same member comes back in the
// new stage; on an emptyDir, a new member replaces it, added in the new
// stage); a member whose peer scheme changes and whose data survives its
// restart has its peer URL updated in etcd first: its peers then cannot
// reach it until it restarts, as during any restart. Every pod made while a
// switch is under way (a restart, a replacement, a scale) is made in the
// stage the switch moves members to, with the peer scheme etcd records for
// it; the operator dials https once every member serves it and the stage
// members move to does too. pkg/util/tlsissue's
// TestTLSSwitchedOnAndOffKeepsAClusterServing carries the stages out on
// real etcd of every supported version.

// targetStage is the stage the spec asks every member to be in.
func targetStage(tp *api.TLSPolicy) k8sutil.TLSStage {
	switch {
	case tp.Mode() == "":
		return k8sutil.TLSPlain
	case tp.IsSecurePeer() && tp.IsSecureClient():
		return k8sutil.TLSSecure
	}
	return k8sutil.TLSNoStage
}

// tlsSwitchView is what the pass sees of a TLS switch: the stage the spec
// asks for, and the stage of every member with a pod.
type tlsSwitchView struct {
	target k8sutil.TLSStage
	stages map[string]k8sutil.TLSStage
	// lo and hi are the lowest and highest stages of the members.
	lo, hi k8sutil.TLSStage
	// holdClients: the user holds the switch while both client schemes
	// are served (HoldClientsAnnotation).
	holdClients bool
}

// tlsSwitchOf reads the stages of the member pods; nil without any.
func tlsSwitchOf(spec *api.EtcdCluster, pods map[string]*corev1.Pod, holdClients bool) *tlsSwitchView {
	v := &tlsSwitchView{target: targetStage(spec.Spec.TLS), stages: map[string]k8sutil.TLSStage{}, holdClients: holdClients}
	for name, p := range pods {
		t, ok := k8sutil.MemberTLSOf(p)
		if !ok {
			continue
		}
		st := t.Stage()
		if len(v.stages) == 0 || st < v.lo {
			v.lo = st
		}
		if len(v.stages) == 0 || st > v.hi {
			v.hi = st
		}
		v.stages[name] = st
	}
	if len(v.stages) == 0 {
		return nil
	}
	return v
}

// switching tells whether a member is in another stage than the spec asks
// for, and a switch can move it there.
func (v *tlsSwitchView) switching() bool {
	return v != nil && v.target != k8sutil.TLSNoStage && (v.lo != v.target || v.hi != v.target)
}

// movesOn tells the switch's direction: towards TLS, or away from it.
func (v *tlsSwitchView) movesOn() bool { return v.target > v.lo }

// from and to are the stages the switch moves members between now.
func (v *tlsSwitchView) from() k8sutil.TLSStage {
	if v.movesOn() {
		return v.lo
	}
	return v.hi
}

func (v *tlsSwitchView) to() k8sutil.TLSStage {
	if v.movesOn() {
		return v.lo + 1
	}
	return v.hi - 1
}

// dropsAClientScheme tells whether stage st serves clients one scheme
// alone: the stage a hold of clients keeps the switch out of.
func dropsAClientScheme(st k8sutil.TLSStage) bool {
	return st == k8sutil.TLSSecure || st == k8sutil.TLSPlain
}

// madeIn is the stage a pod made now is made in: the stage members move
// to, but for one that drops a client scheme while the user holds the
// switch (HoldClientsAnnotation), and so the last member of a stage,
// restarted once the others moved, does not reach it either.
func (v *tlsSwitchView) madeIn() k8sutil.TLSStage {
	to := v.to()
	if v.holdClients && dropsAClientScheme(to) {
		return v.from()
	}
	return to
}

// operatorDialsHTTPS tells whether the operator (and every pod made now)
// uses https for clients: once every member and the stage members move to
// serve it.
func (v *tlsSwitchView) operatorDialsHTTPS() bool {
	return v.lo >= k8sutil.TLSCertificates && v.hi != k8sutil.TLSNoStage && v.madeIn() >= k8sutil.TLSCertificates
}

// withTLSSwitch gives template m the stage members move to, while a switch
// is under way: a pod made now is made in it. Its peer scheme is that of a
// new member; a member etcd knows keeps the one etcd records
// (etcdutil.MembersFromEtcd).
func withTLSSwitch(m etcdutil.Member, v *tlsSwitchView) etcdutil.Member {
	if !v.switching() || v.hi == k8sutil.TLSNoStage {
		return m
	}
	to := v.madeIn()
	m.SecurePeer = to >= k8sutil.TLSPeersSecure
	m.SwitchingTLS = to == k8sutil.TLSCertificates || to == k8sutil.TLSPeersSecure
	m.SecureClient = v.operatorDialsHTTPS()
	return m
}

// giveClientsOf gives the members of ms, the pass's own copy, the client
// side of template t:
// the membership the goroutine learnt before is dialled as the members
// serve now, and a member restarted is made in the stage members move to.
// A member whose peer scheme in etcd is not the one of that stage (its
// peer URL not updated yet, or its pod gone while the others moved on)
// keeps its scheme and holds the certificates, serving clients both ways:
// peers of any stage reach it, and it reaches them.
func giveClientsOf(ms etcdutil.MemberSet, t etcdutil.Member) {
	for _, m := range ms {
		m.SecureClient = t.SecureClient
		m.SwitchingTLS = t.SwitchingTLS || m.SecurePeer != t.SecurePeer
	}
}

// tlsSwitchChange is one change of a TLS switch.
type tlsSwitchChange int

const (
	tlsSwitchWait tlsSwitchChange = iota
	// tlsSwitchUpdatePeerURL changes the member's peer URL in etcd to the
	// scheme of the stage it moves to.
	tlsSwitchUpdatePeerURL
	// tlsSwitchRestart deletes the member's pod: it comes back, or is
	// replaced, in the stage it moves to.
	tlsSwitchRestart
)

// tlsSwitchDecision is the change chosen, about member, and why.
type tlsSwitchDecision struct {
	change tlsSwitchChange
	member string
	// peerHTTPS is the peer scheme of tlsSwitchUpdatePeerURL.
	peerHTTPS bool
	reason    string
}

// tlsSwitchFacts are what the chooser reads besides the stages: the peer
// scheme etcd records for each member, the leader's name, and whether
// members keep their data through a restart (claims).
type tlsSwitchFacts struct {
	peerHTTPS map[string]bool
	leader    string
	keepsData bool
}

// nextTLSSwitchChange chooses the one change a switch makes next: a member
// of the stage the switch moves from, followers first, the leader last; a
// member whose peer URL already has the new scheme first of all (it is cut
// off from its peers until it restarts). The last member of a stage,
// restarted once the others moved, comes back in the stage after theirs
// where its peer scheme allows: it can talk to them there too, and that
// saves it a restart.
func nextTLSSwitchChange(v *tlsSwitchView, f tlsSwitchFacts) tlsSwitchDecision {
	from, to := v.from(), v.to()
	if v.hi == k8sutil.TLSNoStage {
		for _, name := range sortedKeys(v.stages) {
			if v.stages[name] == k8sutil.TLSNoStage {
				return tlsSwitchDecision{reason: fmt.Sprintf("TLS cannot be switched: member %s runs %s", name, k8sutil.TLSNoStage)}
			}
		}
	}
	var movers []string
	for _, name := range sortedKeys(v.stages) {
		if v.stages[name] == from {
			movers = append(movers, name)
		}
	}
	if i := slices.Index(movers, f.leader); i >= 0 && len(movers) > 1 {
		movers = append(slices.Delete(movers, i, i+1), f.leader)
	}
	wantHTTPS := to >= k8sutil.TLSPeersSecure
	schemeChanges := (from >= k8sutil.TLSPeersSecure) != wantHTTPS
	why := fmt.Sprintf("switching TLS %s: members move from stage %s to %s", onOrOff(v), from, to)
	if schemeChanges {
		for _, name := range movers {
			if https, known := f.peerHTTPS[name]; known && https == wantHTTPS {
				return tlsSwitchDecision{change: tlsSwitchRestart, member: name, reason: why + "; its peer URL is already " + scheme(wantHTTPS)}
			}
		}
	}
	if len(movers) == 0 {
		return tlsSwitchDecision{reason: why + ", and no member is in stage " + from.String()}
	}
	name := movers[0]
	if https, known := f.peerHTTPS[name]; schemeChanges && f.keepsData {
		if !known {
			return tlsSwitchDecision{reason: why + "; etcd's record of " + name + " is not read yet"}
		}
		if https != wantHTTPS {
			return tlsSwitchDecision{change: tlsSwitchUpdatePeerURL, member: name, peerHTTPS: wantHTTPS, reason: why}
		}
	}
	return tlsSwitchDecision{change: tlsSwitchRestart, member: name, reason: why}
}

func onOrOff(v *tlsSwitchView) string {
	if v.movesOn() {
		return "on"
	}
	return "off"
}

func scheme(https bool) string {
	if https {
		return "https"
	}
	return "http"
}

// switchTLS is step 16b: one change of a TLS switch, after the repairs,
// scaling and upgrades that come first, each one on the evidence an
// upgrade's restart needs (every member ready and answering etcd in this
// pass, a leader, every follower caught up).
func switchTLS(s *snapshot) (action, bool) {
	v := s.tlsSwitch
	if !v.switching() {
		return action{}, false
	}
	if v.holdClients && dropsAClientScheme(v.to()) {
		return waiting(fmt.Sprintf("switching TLS %s holds with clients served http and https: annotation %s is \"true\"; remove it once clients use %s",
			onOrOff(v), api.HoldClientsAnnotation, scheme(v.to() == k8sutil.TLSSecure))), true
	}
	if a, ok := readyForUpgrade(s); ok {
		return a, true
	}
	f := tlsSwitchFacts{peerHTTPS: map[string]bool{}, keepsData: s.usesClaims()}
	for name, m := range s.membership {
		f.peerHTTPS[name] = m.SecurePeer
	}
	if l := s.membership.ByID(s.etcd.health.LeaderID); l != nil {
		f.leader = l.Name
	}
	d := nextTLSSwitchChange(v, f)
	if d.change == tlsSwitchWait {
		return waiting(d.reason), true
	}
	return action{kind: actSwitchTLS, tlsChange: d.change, member: d.member, peerHTTPS: d.peerHTTPS, reason: d.reason}, true
}

// eventTLSSwitch tells each change of a TLS switch.
const eventTLSSwitch = "TLSSwitch"

// carryOutTLSSwitch makes change a of a TLS switch.
func (c *Cluster) carryOutTLSSwitch(ctx context.Context, s *snapshot, a action) outcome {
	m := s.membership[a.member]
	switch a.tlsChange {
	case tlsSwitchUpdatePeerURL:
		if m == nil {
			return outcome{err: fmt.Errorf("member %s is not in the membership", a.member)}
		}
		moved := *m
		moved.SecurePeer = a.peerHTTPS
		if err := c.cfg.Etcd.MemberUpdatePeerURL(ctx, c.clientConfig(s, s.changeEndpoints(a.member)), m.ID, moved.PeerURL()); err != nil {
			return outcome{err: err}
		}
		// The membership changed: read it again before the restart.
		c.knownMembership.forget()
		c.tell(corev1.EventTypeNormal, eventTLSSwitch, fmt.Sprintf("Member %s's peer URL is now %s (%s); it restarts next", a.member, moved.PeerURL(), a.reason))
	case tlsSwitchRestart:
		if err := c.deleteSeenPod(ctx, s, a.member, "to switch TLS"); err != nil {
			return outcome{err: err}
		}
		c.tell(corev1.EventTypeNormal, eventTLSSwitch, fmt.Sprintf("Member %s restarted (%s)", a.member, a.reason))
	}
	return outcome{requeue: c.cfg.MinPassInterval}
}
