package cluster

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/etcdversion"
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
	// replace are the old members to replace rather than patch (exec
	// probes on a shell-free target), by name.
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
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
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
			pr := newProblem(problemUpgradeRefused,
				"upgrade refused: member %s runs etcd %s and cannot go to %s: %v; nothing is patched until spec.version is changed",
				name, displayVersion(from), target, err)
			p.refused = &pr
		}
		if k8sutil.HasExecProbes(m.pod) && shellFree {
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

// checkUpgrade enforces etcd's version rules member by member: one minor
// version up at a time, and no minor downgrade (etcd refuses to start on data
// of a newer minor) but from 3.6 to 3.5, which etcd's downgrade API allows
// (the cluster-wide conditions of that move are maintenance.CheckVersionMove's).
// Patch releases may go either way.
func checkUpgrade(from, to string) error {
	f, err := etcdversion.Parse(from)
	if err != nil {
		return errors.New("its version is unknown")
	}
	t, err := etcdversion.Parse(to)
	if err != nil {
		return err
	}
	switch {
	case f.Major != t.Major:
		return errors.New("etcd cannot change its major version in place")
	case f.Release().Downgrade && t.Minor == f.Minor-1:
		return nil
	case t.Minor < f.Minor:
		return fmt.Errorf("etcd does not support downgrading from %s to %s", f.MinorString(), t.MinorString())
	case t.Minor > f.Minor+1:
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
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == k8sutil.EtcdContainerName {
			return imageVersion(ctr.Image)
		}
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
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == k8sutil.EtcdContainerName && sameImage(ctr.Image, st.Image) {
			return podVersion(pod)
		}
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

// etcdContainerStatus is k8sutil.EtcdContainerStatus, under the name the
// planning files (decide.go, act.go) still call while they are being split.
func etcdContainerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	return k8sutil.EtcdContainerStatus(pod)
}
