package cluster

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// actionKind is what a pass does. decide returns exactly one action per
// pass; act carries it out.
type actionKind int

const (
	// actIdle: the cluster is what its spec asks for.
	actIdle actionKind = iota
	// actWait: something has to happen first; reason says what.
	actWait
	// actReadEtcd: the decision needs etcd's view (membership from the
	// leader, every member's health) read in this pass.
	actReadEtcd
	// actCreateServices creates the missing peer and client services.
	actCreateServices
	// actIssueCertificates creates the missing secrets of issued TLS: the
	// CA's, and the certificates it signs.
	actIssueCertificates
	// actRenewCertificate renews the certificate of one secret of issued
	// TLS from its CA, in place.
	actRenewCertificate
	// actMakeCertificates creates or corrects the cert-manager
	// Certificates of issued TLS from cert-manager (certmanager.go).
	actMakeCertificates
	// actCopyCertificate copies the certificate cert-manager issued for
	// one kind (member names it) into the operator's secret.
	actCopyCertificate
	// actReissueCertificate asks cert-manager to issue one kind's
	// Certificate again, for a rotation the user asked for.
	actReissueCertificate
	// actRotateCA makes one change of a CA rotation of issued TLS
	// (carotation.go); caChange is which.
	actRotateCA
	// actCarryIssuerCA makes one change that carries a CA changed at the
	// cert-manager issuer into the cluster (certmanager_ca.go): caChange
	// caWriteTrust for the copy of one kind, caRestartMember for a member.
	actCarryIssuerCA
	// actSwitchTLS makes one change of TLS switched on or off in a running
	// cluster (tlsswitch.go); tlsChange is which.
	actSwitchTLS
	// actSyncBudget makes, changes or deletes the cluster's
	// PodDisruptionBudget.
	actSyncBudget
	// actRecordCreating sets the phase of a new cluster to Creating, and
	// nothing else: the end of the pass writes it.
	actRecordCreating
	// actSeed creates the first member's claim and pod with
	// --initial-cluster-state=new.
	actSeed
	// actStartTogether creates the claims and pods of every member of a new
	// cluster at once, from one static --initial-cluster (together.go).
	actStartTogether
	// actResumeTogether creates the pods of members started together that
	// have none, with the flags the others were made with.
	actResumeTogether
	// actRestartTogether deletes the claims and pods of members started
	// together that never served and sets the phase back to Creating, so
	// that the next pass starts them again with a new token.
	actRestartTogether
	// actAdopt takes over pods found while the phase says Creating: phase
	// Running, membership read from etcd next.
	actAdopt
	// actAnnounceAdoption tells which members the original made were
	// adopted as they run, and records the cluster Running.
	actAnnounceAdoption
	// actReseed deletes the pod of a seed that never ran (its claim stays,
	// for the next seed to start on) and sets the phase back to Creating,
	// so that the next pass seeds from the spec in force.
	actReseed
	// actDeleteStrayPod deletes a pod of the cluster that belongs to no
	// member and is no joining pod; its claim goes in a later pass.
	actDeleteStrayPod
	// actDeleteJoiner deletes a joining pod that can no longer be added, and
	// its claim.
	actDeleteJoiner
	// actDeleteStrayClaim deletes a claim that belongs to no member, pod or
	// joining pod.
	actDeleteStrayClaim
	// actRemoveDeadMember removes a dead member from etcd, then deletes its
	// pod and claim; a new member replaces it later.
	actRemoveDeadMember
	// actDeleteFailedPod deletes the ended pod of a member that is restarted
	// in place, so that its name is free for the new pod.
	actDeleteFailedPod
	// actForceDeletePod deletes, at once, a pod stuck terminating on a node
	// that counts as lost (spec.pod.nodeLostAfterSeconds), whose member
	// etcd's leader confirms does not answer.
	actForceDeletePod
	// actConvertInPlace deletes the pod of a running member the original
	// made whose data is on a claim, so that restartInPlace gives it a pod
	// of this operator's layout on that claim: the same member, no copy.
	actConvertInPlace
	// actRestartMembers creates new pods for members on their claims, with
	// their names and data: the same etcd members, no membership change.
	actRestartMembers
	// actPromoteLearner makes a learner vote.
	actPromoteLearner
	// actCreateJoiner creates the claim and pod of a new member, held back by
	// its wait-membership init container until it is added.
	actCreateJoiner
	// actAddJoiner adds the member of a joining pod to etcd (as a learner
	// when every member can have learners).
	actAddJoiner
	// actRemoveMember removes a member to shrink the cluster, then deletes
	// its pod and claim.
	actRemoveMember
	// actUpgradeMember patches a member's pod to another etcd version.
	actUpgradeMember
	// actEnableDowngrade enables etcd's downgrade of the cluster version
	// (3.6 to 3.5), after which members are patched back one at a time.
	actEnableDowngrade
	// actMoveLeader hands leadership to a member, before the leader is
	// taken down or defragmented.
	actMoveLeader
	// actCompact compacts the history to the current revision.
	actCompact
	// actDefragment defragments one member.
	actDefragment
	// actDisarmNoSpace disarms a NOSPACE alarm once every member has room.
	actDisarmNoSpace
	// actForceNewCluster restarts a surviving member on its claim with
	// --force-new-cluster: a one-member cluster with its data.
	actForceNewCluster
	// actRestoreFromBackup asks the restore operator to restore the cluster
	// from its newest successful EtcdBackup.
	actRestoreFromBackup
)

var actionNames = map[actionKind]string{
	actIdle:               "idle",
	actWait:               "wait",
	actReadEtcd:           "read etcd",
	actCreateServices:     "create services",
	actSyncBudget:         "sync disruption budget",
	actIssueCertificates:  "issue certificates",
	actRenewCertificate:   "renew certificate",
	actMakeCertificates:   "make certificates",
	actCopyCertificate:    "copy certificate",
	actReissueCertificate: "reissue certificate",
	actRotateCA:           "rotate CA:",
	actCarryIssuerCA:      "carry the issuer's CA:",
	actSwitchTLS:          "switch TLS:",
	actRecordCreating:     "record phase Creating",
	actSeed:               "seed",
	actStartTogether:      "start together",
	actResumeTogether:     "resume start together",
	actRestartTogether:    "start together again",
	actAdopt:              "adopt",
	actAnnounceAdoption:   "announce adoption",
	actReseed:             "reseed",
	actDeleteStrayPod:     "delete stray pod",
	actDeleteJoiner:       "delete joiner",
	actDeleteStrayClaim:   "delete stray claim",
	actRemoveDeadMember:   "remove dead member",
	actDeleteFailedPod:    "delete failed pod",
	actForceDeletePod:     "force-delete pod",
	actRestartMembers:     "restart in place",
	actConvertInPlace:     "convert in place",
	actPromoteLearner:     "promote learner",
	actCreateJoiner:       "create joiner",
	actAddJoiner:          "add joiner",
	actRemoveMember:       "remove member",
	actUpgradeMember:      "upgrade member",
	actEnableDowngrade:    "enable downgrade",
	actMoveLeader:         "move leader to",
	actCompact:            "compact",
	actDefragment:         "defragment",
	actDisarmNoSpace:      "disarm NOSPACE",
	actForceNewCluster:    "force a new cluster from",
	actRestoreFromBackup:  "restore from the newest backup",
}

func (k actionKind) String() string { return actionNames[k] }

// action is one decision of decide.
type action struct {
	kind actionKind
	// caChange is the change of a CA rotation actRotateCA or
	// actCarryIssuerCA makes.
	caChange caChange
	// request is the rotation request an actReissueCertificate is for;
	// issuerCA, when set, the issuer's CA (caFingerprint) it is for
	// instead.
	request, issuerCA string
	// tlsChange is the change of a TLS switch actSwitchTLS makes, and
	// peerHTTPS the peer scheme it updates a member's peer URL to.
	tlsChange tlsSwitchChange
	peerHTTPS bool
	// member is the member, pod or claim the action is about; names are
	// the members of an action about several.
	member string
	names  []string
	// without are members a joining pod is made without, in its
	// --initial-cluster: they are removed before it is added.
	without []string
	// behind are joining members not added yet that a joining pod is made
	// behind: its --initial-cluster names them, and they are added first.
	behind []string
	// version is the etcd version of a seed, a new member or an upgrade.
	version string
	// learner adds the member as a learner; force restarts it with
	// --force-new-cluster.
	learner, force bool
	// failure marks the deletion of a member's pod that ended (Failed,
	// evicted by the kubelet): the restart in place after it follows a
	// failure of the member and counts on the repair ladder.
	failure bool
	// uid is the object a deletion is about, so that one made again under
	// its name is not the one deleted.
	uid types.UID
	// reason says why (for waits, what is waited for).
	reason string
	// after is when a wait wants the next pass (0: at the next event or
	// tick); backoff asks for the next pass after the growing wait backoff,
	// for waits on etcd.
	after   time.Duration
	backoff bool
}

// String is the action as logs and tests show it: "upgrade member
// example-b to 3.5.21 (a follower)".
func (a action) String() string {
	s := a.kind.String()
	switch {
	case a.kind == actSwitchTLS && a.tlsChange == tlsSwitchUpdatePeerURL:
		s += " update the peer URL to " + scheme(a.peerHTTPS) + " of"
	case a.kind == actSwitchTLS:
		s += " restart"
	}
	if a.member != "" {
		s += " " + a.member
	}
	for _, m := range a.names {
		s += " " + m
	}
	if a.version != "" {
		s += " to " + a.version
	}
	if len(a.behind) > 0 {
		s += " behind " + strings.Join(a.behind, ", ")
	}
	if a.learner {
		s += " as learner"
	}
	if a.force {
		s += " with --force-new-cluster"
	}
	if a.reason != "" {
		s += fmt.Sprintf(" (%s)", a.reason)
	}
	return s
}
