package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// shellFreeMinor is the first etcd 3.x minor whose official images have no
// shell, so the exec probes of pods made for 3.2 cannot run on them.
const shellFreeMinor = 5

// versionPlan compares every member pod with spec.version. Each pod is
// compared with the current spec, not with the version an upgrade started
// with, so a version change in the middle of an upgrade just changes the goal.
type versionPlan struct {
	target string
	// newMembers is the version new members are created with: the target,
	// or, when the upgrade is refused, the newest version running (a member
	// of the refused version could not join the cluster).
	newMembers string
	// current is the version every member pod runs, "" if they differ.
	current string
	// refused is why the upgrade is not done; nothing is patched then.
	refused *problem
	// old are the members whose pod is not on target, by name.
	old []string
	// replace are the old members to replace rather than patch (exec
	// probes on a shell-free target), by name.
	replace []string
}

func planVersions(target string, v memberView) versionPlan {
	p := versionPlan{target: target, newMembers: target}
	_, targetMinor, _ := api.ParseVersion(target)
	newest := ""
	running := map[string]bool{}
	for _, name := range sortedKeys(v.pods) {
		pod := v.pods[name]
		ver := podVersion(pod)
		running[ver] = true
		if ver != "" && (newest == "" || compareVersions(ver, newest) > 0) {
			newest = ver
		}
		if ver == target {
			continue
		}
		p.old = append(p.old, name)
		if err := checkUpgrade(ver, target); err != nil && p.refused == nil {
			p.refused = &problem{
				code:  reasonUpgradeRefused,
				event: warnUpgradeRefused,
				msg: fmt.Sprintf("upgrade refused: member %s runs etcd %s and cannot go to %s: %v; nothing is patched until spec.version is changed",
					name, displayVersion(ver), target, err),
				byMessage: true,
			}
		}
		if k8sutil.HasExecProbes(pod) && targetMinor >= shellFreeMinor {
			p.replace = append(p.replace, name)
		}
	}
	if len(running) == 1 {
		for ver := range running {
			p.current = ver
		}
	}
	if p.refused != nil {
		p.replace = nil
		if newest != "" {
			p.newMembers = newest
		}
	} else if oldest := oldestVersion(running); oldest != "" && len(p.old) > 0 && len(p.replace) == 0 {
		// Mid-upgrade, a new member (a replacement above all) starts at the oldest
		// version still running: etcd's cluster version is the lowest of its
		// members', and a member of that version can always join, whereas one of
		// the target may not be able to yet (etcd 3.6 refuses a log that still
		// holds the v2 entries 3.4 and 3.5 write). The rollout patches it later.
		// Members replaced because they cannot be patched are the upgrade itself,
		// so those start on the target.
		p.newMembers = oldest
	}
	return p
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

// haltFailedUpgrade refuses to go on with an upgrade whose last patched member
// died on the target version: patching the next one would most likely kill it
// too, one member after another. The dead member is replaced like any other
// (at the version the rest runs); changing spec.version starts a new attempt.
func (c *Cluster) haltFailedUpgrade(p *versionPlan) {
	f := c.failedUpgrade
	if f != nil && f.version != p.target {
		c.failedUpgrade = nil // spec.version changed: a new attempt
		return
	}
	if f == nil || len(p.old) == 0 {
		return
	}
	p.refused = &problem{
		code:  reasonUpgradeFailed,
		event: warnUpgradeFailed,
		msg: fmt.Sprintf("upgrade to %s halted: member %s stopped after it was upgraded (see its logs with kubectl logs --previous); "+
			"the other members are left on their version, and a replacement member is started on it. Set spec.version to the running version, or to %s again to retry",
			p.target, f.member, p.target),
		byMessage: true,
	}
	p.replace = nil
}

// checkUpgrade enforces etcd's upgrade rule: one minor version at a time, and
// no minor downgrade (etcd refuses to start on data of a newer minor). Patch
// releases may go either way.
func checkUpgrade(from, to string) error {
	fMajor, fMinor, err := api.ParseVersion(from)
	if err != nil {
		return errors.New("its version is unknown")
	}
	tMajor, tMinor, err := api.ParseVersion(to)
	if err != nil {
		return err
	}
	switch {
	case fMajor != tMajor:
		return errors.New("etcd cannot change its major version in place")
	case tMinor < fMinor:
		return fmt.Errorf("etcd does not support downgrading from %d.%d to %d.%d", fMajor, fMinor, tMajor, tMinor)
	case tMinor > fMinor+1:
		return fmt.Errorf("etcd upgrades one minor version at a time: upgrade to a %d.%d release first", fMajor, fMinor+1)
	}
	return nil
}

// podVersion is the etcd version a member pod runs: its etcd.version
// annotation, or else the tag of its etcd image.
func podVersion(pod *corev1.Pod) string {
	if v := k8sutil.PodEtcdVersion(pod); v != "" {
		return api.NormalizeVersion(v)
	}
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name != k8sutil.EtcdContainerName {
			continue
		}
		if i := strings.LastIndex(ctr.Image, ":"); i >= 0 && !strings.Contains(ctr.Image[i:], "/") {
			return api.NormalizeVersion(ctr.Image[i+1:])
		}
	}
	return ""
}

func displayVersion(v string) string {
	if v == "" {
		return "an unknown version"
	}
	return v
}

// compareVersions orders "3.5.21"-style versions numerically; pre-release
// suffixes are ignored and unparsable parts count as 0.
func compareVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func versionParts(v string) [3]int {
	var out [3]int
	core, _, _ := strings.Cut(api.NormalizeVersion(v), "-")
	for i, s := range strings.SplitN(core, ".", 3) {
		out[i], _ = strconv.Atoi(s)
	}
	return out
}

// setVersionStatus reports the versions and the Upgrading condition.
func (c *Cluster) setVersionStatus(p versionPlan) {
	s := &c.status
	switch {
	case p.refused != nil:
		c.problems = append(c.problems, *p.refused)
		c.removeCondition(api.ClusterConditionUpgrading)
		s.TargetVersion = ""
	case len(p.old) == 0:
		c.removeCondition(api.ClusterConditionUpgrading)
		s.TargetVersion = ""
	default:
		s.TargetVersion = p.target
		c.setCondition(api.ClusterConditionUpgrading, corev1.ConditionTrue, reasonUpgrading, "upgrading to "+p.target)
	}
	if p.current != "" {
		s.CurrentVersion = p.current
	}
}

// upgrade moves one member to spec.version, when the cluster is complete and
// healthy. A member is patched in place: the kubelet restarts the etcd
// container on the new image and the data directory survives. The next
// member waits until this one runs the new image and is Ready again, and
// until etcd is healthy (the original patched one member per tick, Ready or
// not). Followers go first and the leader last, so there is one leader
// election, not one per member.
func (c *Cluster) upgrade(ctx context.Context, cl *api.EtcdCluster, v memberView, p versionPlan) (time.Duration, error) {
	if p.refused != nil || len(p.old) == 0 {
		return 0, nil
	}
	if e := c.upgradeExpect; e != nil {
		c.log.Debugf("waiting for member %s to run %s and be ready", e.name, e.image)
		return 0, nil
	}
	if n := c.members.Size(); len(v.ready) < n {
		c.log.Debugf("waiting for every member to be ready before upgrading the next (%d of %d)", len(v.ready), n)
		return 0, nil
	}
	if len(p.replace) > 0 {
		// A pod made for etcd 3.2 probes with etcdctl through a shell, and
		// probes cannot be changed on a pod, so it cannot run a shell-free
		// image. It is replaced: a new member is added first and the old one
		// removed once the new one is Ready (removeOneMember prefers it).
		// Adding first keeps the cluster's tolerance to failures during the
		// exchange, and is the only way for a single-member cluster.
		c.log.Infof("member %s cannot run %s in place (its probes need a shell); adding its replacement first", p.replace[0], p.target)
		return c.addOneMember(ctx, cl, v, p)
	}
	h, err := c.etcdReadyForChange(ctx, v)
	if err != nil {
		return c.waitOrFail(err)
	}
	c.waitBackoff.reset()

	leader := ""
	for _, m := range h.Members {
		if m.ID == h.LeaderID {
			leader = m.Name
		}
	}
	name := p.old[0]
	for _, n := range p.old {
		if n != leader {
			name = n
			break
		}
	}
	pod := v.pods[name]
	from := podVersion(pod)
	image := api.EtcdImage(cl.Spec.Repository, p.target)
	if err := c.patchMemberPod(ctx, pod, p.target, image); err != nil {
		return 0, err
	}
	restarts := int32(0)
	if st := etcdContainerStatus(pod); st != nil {
		restarts = st.RestartCount
	}
	c.upgradeExpect = &upgradeExpectation{name: name, version: p.target, restarts: restarts, image: image, deadline: c.now().Add(c.cfg.PendingTimeout)}
	c.log.Infof("upgrading member %s from %s to %s", name, from, p.target)
	// The trailing space is the original's.
	c.event(corev1.EventTypeNormal, eventMemberUpgraded, fmt.Sprintf("Member %s upgraded from %s to %s ", name, from, p.target))
	return 0, nil
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
