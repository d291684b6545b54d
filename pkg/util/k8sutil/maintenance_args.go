package k8sutil

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	corev1 "k8s.io/api/core/v1"
)

// MaintenanceArgs returns the etcd flags that carry a cluster's maintenance
// settings (v1beta2.ClusterSpec.ResolvedMaintenance) to a member running
// version. Flag names follow what each etcd accepts, as read from its
// --help and checked by starting it (3.4.23, 3.5.21, 3.6.6):
//
//   - 3.2: --quota-backend-bytes and --auto-compaction-retention in whole
//     hours only; no corruption checks.
//   - 3.3 to 3.6: --auto-compaction-mode, --experimental-initial-corrupt-check
//     and --experimental-corrupt-check-time; from 3.5.5 also
//     --experimental-compact-hash-check-enabled.
//   - 3.7 and later: the experimental names are gone; --feature-gates=
//     InitialCorruptCheck=true,CompactHashCheck=true and --corrupt-check-time.
//
// 3.6 gets the experimental names although it deprecates them for the
// feature gates: the operator moves a member between versions by patching
// its image, so a pod keeps the flags it was created with, and 3.5 refuses
// --feature-gates. Names both 3.5 and 3.6 accept keep a member movable
// either way (upgrade, and the 3.6 to 3.5 downgrade); 3.6 accepts the 3.7
// names too, so 3.7 pods can go back to 3.6. Moving a pod across two renames
// (created on 3.6, patched to 3.7) needs a new pod: RefusedArgs says so.
//
// A setting is left out when pod.etcdEnv already sets its variable: etcd
// refuses to start when a flag is also given through its variable, and 3.6
// refuses the experimental corruption flag next to any --feature-gates. A
// written setting and the same variable are refused by validation; what is
// left out here is a default the user chose to override.
func MaintenanceArgs(spec *v1beta2.ClusterSpec, version string) []string {
	v, err := etcdversion.Parse(version)
	if err != nil {
		return nil
	}
	r := v.Release()
	m := spec.ResolvedMaintenance()
	env := userEnv(spec)
	var args []string
	add := func(flag string, blockers ...string) {
		if !slices.ContainsFunc(blockers, env.has) {
			args = append(args, flag)
		}
	}

	if m.QuotaBytes > 0 {
		add(fmt.Sprintf("--quota-backend-bytes=%d", m.QuotaBytes), v1beta2.EnvQuota)
	}
	if ac := m.AutoCompaction; ac != nil {
		switch {
		case r.AutoCompactionMode:
			add("--auto-compaction-mode="+string(ac.Mode), v1beta2.EnvAutoCompactionMode)
			add("--auto-compaction-retention="+ac.Retention, v1beta2.EnvAutoCompactionRetention)
		case ac.Mode == v1beta2.AutoCompactionPeriodic && isWhole(ac.Retention):
			add("--auto-compaction-retention="+ac.Retention, v1beta2.EnvAutoCompactionRetention)
		}
	}

	switch r.CorruptCheckFlags {
	case etcdversion.CorruptCheckFeatureGates:
		var gates []string
		if m.InitialCorruptCheck {
			gates = append(gates, "InitialCorruptCheck=true")
		}
		if m.CompactHashCheck {
			gates = append(gates, "CompactHashCheck=true")
		}
		if len(gates) > 0 {
			add("--feature-gates="+strings.Join(gates, ","), v1beta2.EnvFeatureGates)
		}
		if m.CorruptCheckInterval > 0 {
			add("--corrupt-check-time="+m.CorruptCheckInterval.String(), v1beta2.EnvCorruptCheckTime36, v1beta2.EnvCorruptCheckTime)
		}
	case etcdversion.CorruptCheckExperimental:
		if m.InitialCorruptCheck {
			add("--experimental-initial-corrupt-check=true", v1beta2.EnvInitialCorruptCheck, v1beta2.EnvFeatureGates)
		}
		if m.CorruptCheckInterval > 0 {
			add("--experimental-corrupt-check-time="+m.CorruptCheckInterval.String(), v1beta2.EnvCorruptCheckTime, v1beta2.EnvCorruptCheckTime36)
		}
		if m.CompactHashCheck && r.ExperimentalCompactHashCheck.In(v) {
			add("--experimental-compact-hash-check-enabled=true", v1beta2.EnvCompactHashCheck, v1beta2.EnvFeatureGates)
		}
	}
	return args
}

// RefusedArgs returns the flags of command (a member's etcd command line)
// that etcd version would refuse to start with, among those MaintenanceArgs
// produces for any version. A member whose image is to be patched to
// version while its command holds such a flag must be replaced by a new pod
// instead.
func RefusedArgs(command []string, version string) []string {
	v, err := etcdversion.Parse(version)
	if err != nil {
		return nil
	}
	r := v.Release()
	var refused []string
	for _, arg := range command {
		name, _, _ := strings.Cut(arg, "=")
		var accepted bool
		switch name {
		case "--auto-compaction-mode":
			accepted = r.AutoCompactionMode
		case "--experimental-initial-corrupt-check", "--experimental-corrupt-check-time":
			accepted = r.CorruptCheckFlags == etcdversion.CorruptCheckExperimental
		case "--experimental-compact-hash-check-enabled":
			accepted = r.ExperimentalCompactHashCheck.In(v)
		case "--feature-gates", "--corrupt-check-time":
			accepted = r.FeatureGates
		default:
			continue
		}
		if !accepted {
			refused = append(refused, arg)
		}
	}
	return refused
}

// PodRefusedArgs is RefusedArgs of the etcd container of a member pod: the
// flags it was created with that etcd version would refuse to start with.
func PodRefusedArgs(pod *corev1.Pod, version string) []string {
	if c := EtcdContainer(pod); c != nil {
		return RefusedArgs(c.Command, version)
	}
	return nil
}

// envNames is the set of variables pod.etcdEnv sets.
type envNames map[string]bool

func (e envNames) has(name string) bool { return e[name] }

func userEnv(spec *v1beta2.ClusterSpec) envNames {
	env := envNames{}
	if spec.Pod != nil {
		for _, e := range spec.Pod.EtcdEnv {
			env[e.Name] = true
		}
	}
	return env
}

func isWhole(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
