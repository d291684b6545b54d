package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	"github.com/openetcd/etcd-operator/pkg/maintenance"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// versionPlan compares every member pod with spec.version. Each pod is
// compared with the current spec, not with the version an upgrade started
// with, so a version change in the middle of an upgrade just changes the goal.
type versionPlan struct {
	target string
	// newMembers is the version new members are created with: the target,
	// the oldest version running during a rollout, or, when the upgrade is
	// refused, the newest version running.
	newMembers string
	// current is the version every running member runs, "" if they differ
	// or none runs.
	current string
	// refused is why the rollout does not go on; nothing is patched then.
	refused *problem
	// old are the members whose pod is not made for the target, by name.
	old []string
	// unfinished are the members whose pod is not made for the target or
	// whose container does not run it yet: the rollout is over when none is.
	unfinished []string
	// replace are the old members to replace rather than patch, by name: a
	// pod's command and probes cannot change, so a pod with exec probes
	// cannot go to a shell-free image, nor one whose flags the target
	// refuses (3.7 dropped the experimental names 3.6 pods carry).
	replace []string
}

func (s *snapshot) planVersions() versionPlan {
	target := s.spec.Spec.Version
	p := versionPlan{target: target, newMembers: target}
	// Official images without a shell cannot run the exec probes of pods
	// made for 3.2.
	shellFree := false
	if v, err := etcdversion.Parse(target); err == nil {
		shellFree = !v.Release().Shell
	}
	newest := ""
	specced := map[string]bool{}
	running := map[string]bool{}
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		if m.pod == nil || k8sutil.IsBeingDeleted(m.pod) {
			continue
		}
		made := podVersion(m.pod)
		specced[made] = true
		if m.version != "" {
			running[m.version] = true
		}
		if made != "" && (newest == "" || compareVersions(made, newest) > 0) {
			newest = made
		}
		// A container that does not run shows no version: that is no
		// upgrade, unless the operator just patched it.
		patched := s.upgradeExpect != nil && s.upgradeExpect.name == name
		if made != target || m.version != "" && m.version != target || patched {
			p.unfinished = append(p.unfinished, name)
		}
		if made == target {
			continue
		}
		p.old = append(p.old, name)
		from := made
		if f := s.failedUpgrade; f != nil && f.member == name && m.version == "" {
			// It never ran the version it was patched to: its data is
			// still that of the version it ran before, and it may go back.
			from = f.from
		}
		if err := checkUpgrade(from, target); err != nil && p.refused == nil {
			switch {
			case from == made && holdsNoData(s, m.pod):
				// Nothing of its version to move from: the member starts on
				// the target.
			case from == made && k8sutil.EtcdNeverRan(m.pod):
				pr := newProblem(problemUpgradeRefused,
					"version change refused: member %s was made for etcd %s, which has not run in its pod, but its claim may hold data an earlier pod wrote with it, "+
						"and etcd %s cannot start on that (%v); nothing is patched until spec.version is changed",
					name, made, target, err)
				p.refused = &pr
			default:
				pr := newProblem(problemUpgradeRefused,
					"upgrade refused: member %s runs etcd %s and cannot go to %s: %v; nothing is patched until spec.version is changed",
					name, displayVersion(from), target, err)
				p.refused = &pr
			}
		}
		if k8sutil.HasExecProbes(m.pod) && shellFree || len(k8sutil.PodRefusedArgs(m.pod, target)) > 0 {
			p.replace = append(p.replace, name)
		}
	}
	if len(running) == 1 {
		for v := range running {
			p.current = v
		}
	}
	if f := s.failedUpgrade; f != nil && f.version == target && len(p.old) > 0 && p.refused == nil {
		// The last member patched to the target stopped on it: patching the
		// next one would most likely stop that one too.
		msg := fmt.Sprintf("upgrade to %s halted: member %s did not run it: %s; the other members stay on their version. "+
			"Set spec.version back to %s (the member is patched back), or fix the cause and set spec.version to another version",
			target, f.member, f.evidence, f.from)
		pr := newProblem(problemUpgradeFailed, "%s", msg)
		p.refused = &pr
	}
	switch {
	case p.refused != nil:
		p.replace = nil
		if newest != "" {
			p.newMembers = newest
		}
	case len(p.old) > 0 && len(p.replace) == 0:
		// Mid-upgrade, a new member (a replacement above all) starts at the
		// oldest version still made: etcd's cluster version is the lowest
		// of its members', and a member of that version can always join,
		// whereas one of the target may not be able to yet (etcd 3.6 refuses
		// a log that still holds the v2 entries 3.4 and 3.5 write). The
		// rollout patches it later. Members replaced because they cannot be
		// patched are the upgrade itself, so those start on the target.
		if oldest := oldestVersion(specced); oldest != "" {
			p.newMembers = oldest
		}
	}
	return p
}

// holdsNoData tells whether a member pod whose etcd never ran holds no data
// that etcd's rules for moving between versions protect: its data directory
// is an emptyDir volume, which lives and dies with the pod, or the cluster
// was never available, so that nobody was told anything is stored (a seed
// is made again on its claim for the same reason). A pod that an init
// container of anyone else's filled (a restore's seed) may hold data. Then a
// cluster created with an image that cannot be pulled is set right by
// setting spec.version, whichever way it goes.
func holdsNoData(s *snapshot, pod *corev1.Pod) bool {
	if pod == nil || !k8sutil.IsMadeByOperator(pod) || !k8sutil.EtcdNeverRan(pod) {
		return false
	}
	if !s.everAvailable {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return false
		}
	}
	return true
}

// oldestVersion is the lowest known version of a set, "" when there is none.
func oldestVersion(versions map[string]bool) string {
	oldest := ""
	for v := range versions {
		if v != "" && (oldest == "" || compareVersions(v, oldest) < 0) {
			oldest = v
		}
	}
	return oldest
}

// checkUpgrade enforces etcd's version rules (etcdversion.MoveBetween)
// member by member: one minor version up at a time, and no minor downgrade
// but where etcd's downgrade API allows one (the cluster-wide conditions of
// that move are maintenance.CheckVersionMove's). Patch releases may go
// either way.
func checkUpgrade(from, to string) error {
	f, err := etcdversion.Parse(from)
	if err != nil {
		return errors.New("its version is unknown")
	}
	t, err := etcdversion.Parse(to)
	if err != nil {
		return err
	}
	switch etcdversion.MoveBetween(f, t) {
	case etcdversion.MoveMajor:
		return errors.New("etcd cannot change its major version in place")
	case etcdversion.MoveDownRefused:
		return fmt.Errorf("etcd does not support downgrading from %s to %s", f.MinorString(), t.MinorString())
	case etcdversion.MoveSkip:
		return fmt.Errorf("etcd upgrades one minor version at a time: upgrade to a %d.%d release first", f.Major, f.Minor+1)
	}
	return nil
}

// podVersion is the etcd version a member pod is made for: its etcd.version
// annotation, or else the tag of its etcd image.
func podVersion(pod *corev1.Pod) string {
	if v := k8sutil.PodEtcdVersion(pod); v != "" {
		return etcdversion.Normalize(v)
	}
	if ctr := k8sutil.EtcdContainer(pod); ctr != nil {
		return imageVersion(ctr.Image)
	}
	return ""
}

// runningVersion is the etcd version the pod's etcd container runs now, ""
// when it does not run. Right after a patch the pod is made for the new
// version while the kubelet still runs the old container: the container's
// own image tells.
func runningVersion(pod *corev1.Pod) string {
	st := k8sutil.EtcdContainerStatus(pod)
	if st == nil || st.State.Running == nil {
		return ""
	}
	if ctr := k8sutil.EtcdContainer(pod); ctr != nil && sameImage(ctr.Image, st.Image) {
		return podVersion(pod)
	}
	return imageVersion(st.Image)
}

// sameImage compares an image as a pod names it with the image its container
// status reports, which the runtime may have qualified ("docker.io/...").
func sameImage(spec, status string) bool {
	return spec == status || strings.HasSuffix(status, "/"+spec)
}

// imageVersion is the version in an image's tag, "" without a tag.
func imageVersion(image string) string {
	if i := strings.LastIndex(image, ":"); i >= 0 && !strings.Contains(image[i:], "/") {
		return etcdversion.Normalize(image[i+1:])
	}
	return ""
}

func displayVersion(v string) string {
	if v == "" {
		return "an unknown version"
	}
	return v
}

// compareVersions orders "3.5.21"-style versions; one that cannot be parsed
// counts as 0.0.0.
func compareVersions(a, b string) int {
	va, _ := etcdversion.Parse(a)
	vb, _ := etcdversion.Parse(b)
	return va.Compare(vb)
}

// upgradeMembers is step 16 of decide.
func upgradeMembers(s *snapshot) (action, bool) {
	p := s.plan
	switch {
	case p.refused != nil:
		return waiting(p.refused.msg), true
	case len(p.old) == 0:
		return action{}, false
	}
	if e := s.upgradeExpect; e != nil {
		return waiting(fmt.Sprintf("member %s is restarting on %s", e.name, e.version)), true
	}
	// A member that is not ready serves nothing, so patching it first costs
	// no availability. It is also how a rollout to an image that never
	// started is taken back: that member is the one not ready.
	for _, name := range p.old {
		if m := s.views[name]; m.pod != nil && !(m.state == memberRunning && m.ready) && m.state != memberTerminating {
			return action{kind: actUpgradeMember, member: name, version: p.target, reason: "it is not ready"}, true
		}
	}
	if a, ok := readyForUpgrade(s); ok {
		return a, true
	}
	if mv := s.versionMove; mv != nil {
		switch mv.Kind {
		case maintenance.MoveWait:
			a := waiting(mv.Reason)
			a.backoff = true
			return a, true
		case maintenance.MoveEnableDowngrade:
			for _, m := range s.etcd.health.Members {
				if m.Downgrade.Enabled {
					a := waiting("the downgrade is enabled; waiting for the cluster version to drop")
					a.backoff = true
					return a, true
				}
			}
			return action{kind: actEnableDowngrade, version: mv.DowngradeTarget, reason: mv.Reason}, true
		}
	}
	name, isLeader := pickOneOldMember(s)
	if !isLeader {
		return action{kind: actUpgradeMember, member: name, version: p.target, reason: "a follower"}, true
	}
	if a, ok := handOff(s, s.etcd.health.LeaderID); ok {
		return a, true
	}
	return action{kind: actUpgradeMember, member: name, version: p.target, reason: "the leader, last"}, true
}

// pickOneOldMember picks the member to patch next, as the original's
// pickOneOldMember did, but the leader last: a follower while one is left
// (each patch of the leader costs an election), else the leader.
func pickOneOldMember(s *snapshot) (name string, isLeader bool) {
	leader := s.etcd.health.LeaderID
	for _, name := range s.plan.old {
		if s.views[name].member.ID != leader {
			return name, false
		}
	}
	return s.plan.old[0], true
}

// handOff moves leadership away from member id before it is taken down, to
// a healthy, caught-up follower: one election, planned, instead of clients
// meeting a leaderless cluster. When no follower can take over it waits.
func handOff(s *snapshot, id uint64) (action, bool) {
	h := maintenance.Handoff(s.etcd.health, id)
	switch {
	case h.Kind == maintenance.MoveLeader:
		return action{kind: actMoveLeader, member: h.Member.Name, reason: h.Reason}, true
	case h.Reason != "the member does not lead" && s.quorum.voters > 1:
		a := waiting(h.Reason)
		a.backoff = true
		return a, true
	}
	return action{}, false
}

// upgradeOneMember patches a member in place: the kubelet restarts the etcd
// container on the new image and the data directory survives. The next
// member waits until this one runs the new image and is Ready again.
func (c *Cluster) upgradeOneMember(ctx context.Context, s *snapshot, a action) outcome {
	pod := s.views[a.member].pod
	from := podVersion(pod)
	if v := runningVersion(pod); v != "" {
		from = v
	} else if f := s.failedUpgrade; f != nil && f.member == a.member {
		from = f.from
	}
	image := api.EtcdImage(s.spec.Spec.Repository, a.version)
	if claim := s.claims[a.member]; claim != nil && k8sutil.ClaimVersion(claim) != a.version {
		// Before the pod: a member restarted on its claim later must start on
		// a version its data allows.
		if err := c.annotateClaimVersion(ctx, a.member, a.version); err != nil {
			return outcome{err: err}
		}
	}
	if err := c.patchMemberPod(ctx, pod, a.version, image); err != nil {
		return outcome{err: err}
	}
	restarts := int32(0)
	if st := k8sutil.EtcdContainerStatus(pod); st != nil {
		restarts = st.RestartCount
	}
	c.expectUpgrade(pod, &upgradeExpectation{name: a.member, version: a.version, from: from, restarts: restarts, image: image,
		deadline: c.now().Add(c.cfg.PendingTimeout)})
	c.log.Infof("upgrading member %s from %s to %s (%s)", a.member, from, a.version, a.reason)
	// The trailing space is the original's.
	c.tell(corev1.EventTypeNormal, eventMemberUpgraded, fmt.Sprintf("Member %s upgraded from %s to %s ", a.member, from, a.version))
	return outcome{downed: a.member}
}

// patchMemberPod sets the etcd container's image and the version annotation
// with one strategic merge patch (containers merge by name). The pod's UID is
// part of the patch: the API server refuses to change a UID, so a different
// pod that took the name in the meantime is never patched.
func (c *Cluster) patchMemberPod(ctx context.Context, pod *corev1.Pod, version, image string) error {
	meta := map[string]any{"annotations": map[string]string{api.AnnotationVersion: version}}
	if pod.UID != "" {
		meta["uid"] = pod.UID
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": meta,
		"spec": map[string]any{
			"containers": []map[string]string{{"name": k8sutil.EtcdContainerName, "image": image}},
		},
	})
	if err != nil {
		return fmt.Errorf("build patch: %w", err)
	}
	_, err = c.cfg.KubeClient.CoreV1().Pods(c.namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return kubeError(fmt.Sprintf("patch pod %s to %s", pod.Name, image), err)
	}
	return nil
}

// annotateClaimVersion records on a member's claim the version that writes it.
func (c *Cluster) annotateClaimVersion(ctx context.Context, name, version string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationVersion: version}}})
	if err != nil {
		return fmt.Errorf("build patch: %w", err)
	}
	_, err = c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return kubeError("record the version on claim "+name, err)
	}
	return nil
}
