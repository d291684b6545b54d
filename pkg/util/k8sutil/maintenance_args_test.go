package k8sutil

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func TestMaintenanceArgs(t *testing.T) {
	quota := resource.MustParse("2Gi")
	withEnv := func(names ...string) *v1beta2.PodPolicy {
		p := &v1beta2.PodPolicy{}
		for _, n := range names {
			p.EtcdEnv = append(p.EtcdEnv, corev1.EnvVar{Name: n, Value: "x"})
		}
		return p
	}
	claim := &v1beta2.PodPolicy{PersistentVolumeClaimSpec: &corev1.PersistentVolumeClaimSpec{
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Gi")}},
	}}
	everything := &v1beta2.MaintenancePolicy{
		Quota:          &quota,
		AutoCompaction: &v1beta2.AutoCompaction{Mode: v1beta2.AutoCompactionRevision, Retention: "10000"},
	}
	checksOff := &v1beta2.MaintenancePolicy{CorruptionCheck: &v1beta2.CorruptionCheck{
		Initial: new(false), PeriodicInterval: &metav1.Duration{}, CompactHashCheck: new(false),
	}}
	hourly := &v1beta2.MaintenancePolicy{
		AutoCompaction:  &v1beta2.AutoCompaction{Retention: "2"},
		CorruptionCheck: &v1beta2.CorruptionCheck{PeriodicInterval: &metav1.Duration{Duration: 90 * time.Minute}},
	}
	defaults35 := []string{
		"--experimental-initial-corrupt-check=true",
		"--experimental-corrupt-check-time=4h0m0s",
		"--experimental-compact-hash-check-enabled=true",
	}
	tests := []struct {
		name    string
		spec    v1beta2.ClusterSpec
		version string
		want    []string
	}{
		{"a 3.5 cluster without a policy gets the corruption checks only", v1beta2.ClusterSpec{}, "3.5.21", defaults35},
		{"3.6 keeps the names 3.5 accepts, so the member can be patched either way", v1beta2.ClusterSpec{}, "3.6.6", defaults35},
		{"3.7 takes feature gates and the new interval flag", v1beta2.ClusterSpec{}, "3.7.2", []string{
			"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true",
			"--corrupt-check-time=4h0m0s",
		}},
		{"3.5 before 3.5.5 has no compact-hash check", v1beta2.ClusterSpec{}, "3.5.4", defaults35[:2]},
		{"3.4 has the initial and periodic checks", v1beta2.ClusterSpec{}, "3.4.23", defaults35[:2]},
		{"3.2 has no corruption checks at all", v1beta2.ClusterSpec{}, "3.2.32", nil},
		{"a claim's derived quota is passed", v1beta2.ClusterSpec{Pod: claim}, "3.5.21", append([]string{"--quota-backend-bytes=1946157056"}, defaults35...)},
		{"written quota and compaction come first", v1beta2.ClusterSpec{Maintenance: everything}, "3.5.21", append([]string{
			"--quota-backend-bytes=2147483648",
			"--auto-compaction-mode=revision",
			"--auto-compaction-retention=10000",
		}, defaults35...)},
		{"checks turned off leave no flag", v1beta2.ClusterSpec{Maintenance: checksOff}, "3.6.6", nil},
		{"checks turned off on 3.7 leave no feature gate", v1beta2.ClusterSpec{Maintenance: checksOff}, "3.7.0", nil},
		{"3.2 compacts by whole hours without a mode flag", v1beta2.ClusterSpec{Maintenance: hourly}, "3.2.32", []string{"--auto-compaction-retention=2"}},
		{"an interval is written as Go prints durations", v1beta2.ClusterSpec{Maintenance: hourly}, "3.4.23", []string{
			"--auto-compaction-mode=periodic",
			"--auto-compaction-retention=2",
			"--experimental-initial-corrupt-check=true",
			"--experimental-corrupt-check-time=1h30m0s",
		}},
		{"a default the user sets through etcdEnv is left to the variable", v1beta2.ClusterSpec{Pod: withEnv(v1beta2.EnvInitialCorruptCheck, v1beta2.EnvCorruptCheckTime36)},
			"3.5.21", defaults35[2:]},
		{"any feature gate in etcdEnv keeps 3.6 from getting the experimental checks it would refuse next to it",
			v1beta2.ClusterSpec{Pod: withEnv(v1beta2.EnvFeatureGates)}, "3.6.6", defaults35[1:2]},
		{"a derived quota yields to ETCD_QUOTA_BACKEND_BYTES", v1beta2.ClusterSpec{Pod: &v1beta2.PodPolicy{
			PersistentVolumeClaimSpec: claim.PersistentVolumeClaimSpec, EtcdEnv: withEnv(v1beta2.EnvQuota).EtcdEnv}}, "3.5.21", defaults35},
		{"an unparsable version gets nothing", v1beta2.ClusterSpec{}, "latest", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MaintenanceArgs(&tt.spec, tt.version)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("MaintenanceArgs(%s) =\n  %q\nwant\n  %q", tt.version, got, tt.want)
			}
			if refused := RefusedArgs(got, tt.version); len(refused) > 0 {
				t.Fatalf("%s would refuse its own flags %q", tt.version, refused)
			}
		})
	}
}

func TestRefusedArgs(t *testing.T) {
	on35 := MaintenanceArgs(&v1beta2.ClusterSpec{}, "3.5.21")
	on37 := MaintenanceArgs(&v1beta2.ClusterSpec{}, "3.7.0")
	tests := []struct {
		name    string
		command []string
		version string
		want    []string
	}{
		{"a 3.5 member can be patched to 3.6", on35, "3.6.6", nil},
		{"a 3.6 member can be patched back to 3.5", MaintenanceArgs(&v1beta2.ClusterSpec{}, "3.6.6"), "3.5.21", nil},
		{"a 3.5 member cannot be patched to 3.7", on35, "3.7.0", on35},
		{"a 3.7 member can be patched back to 3.6", on37, "3.6.6", nil},
		{"a 3.7 member cannot go to 3.5", on37, "3.5.21", on37},
		{"a 3.5.5 member cannot go to 3.5.4", on35, "3.5.4", on35[2:]},
		{"auto-compaction flags move to 3.7, which kept their names", []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"}, "3.7.3", nil},
		{"3.2 has no compaction mode", []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=1"}, "3.2.32", []string{"--auto-compaction-mode=periodic"}},
		{"other flags are not judged", []string{"/usr/local/bin/etcd", "--name=m", "--data-dir=/var/etcd/data"}, "3.2.0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RefusedArgs(tt.command, tt.version); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("RefusedArgs = %q, want %q", got, tt.want)
			}
		})
	}
}
