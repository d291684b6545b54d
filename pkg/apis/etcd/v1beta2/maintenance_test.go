package v1beta2_test

import (
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestQuotaForClaim(t *testing.T) {
	tests := []struct {
		name  string
		claim string
		want  string
	}{
		{"a 4Gi claim keeps half of what the WAL leaves", "4Gi", "1856Mi"},
		{"a 1Gi claim gets a quarter, since half the rest would be less", "1Gi", "320Mi"},
		{"a tiny claim gets a quarter", "256Mi", "64Mi"},
		{"a huge claim stops at 8Gi", "100Gi", "8Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := api.QuotaForClaim(resource.MustParse(tt.claim))
			if want := resource.MustParse(tt.want); got != want.Value() {
				t.Fatalf("QuotaForClaim(%s) = %d, want %s (%d)", tt.claim, got, tt.want, want.Value())
			}
		})
	}
}

func TestResolvedMaintenance(t *testing.T) {
	claim := func(size string) *api.PodPolicy {
		return &api.PodPolicy{PersistentVolumeClaimSpec: &corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		}}
	}
	q := resource.MustParse("3Gi")
	free := resource.MustParse("1Mi")
	tests := []struct {
		name  string
		spec  api.ClusterSpec
		check func(t *testing.T, r api.ResolvedMaintenance)
	}{
		{"no policy means etcd's quota, no auto compaction, checks on and defragmentation past half free", api.ClusterSpec{Size: 3},
			func(t *testing.T, r api.ResolvedMaintenance) {
				want := api.ResolvedMaintenance{
					DefragFreeSpacePercent: 50, DefragMinFreeSpaceBytes: 100 << 20,
					InitialCorruptCheck: true, CorruptCheckInterval: 4 * time.Hour, CompactHashCheck: true,
				}
				if r != want {
					t.Fatalf("resolved = %+v, want %+v", r, want)
				}
			}},
		{"a claim derives the quota", api.ClusterSpec{Size: 3, Pod: claim("4Gi")}, func(t *testing.T, r api.ResolvedMaintenance) {
			if r.QuotaBytes != 1856<<20 || r.QuotaExplicit {
				t.Fatalf("quota = %d explicit %v", r.QuotaBytes, r.QuotaExplicit)
			}
		}},
		{"a written quota wins over the claim", api.ClusterSpec{Size: 3, Pod: claim("4Gi"), Maintenance: &api.MaintenancePolicy{Quota: &q}},
			func(t *testing.T, r api.ResolvedMaintenance) {
				if r.QuotaBytes != 3<<30 || !r.QuotaExplicit {
					t.Fatalf("quota = %d explicit %v", r.QuotaBytes, r.QuotaExplicit)
				}
			}},
		{"auto compaction defaults to periodic", api.ClusterSpec{Size: 3, Maintenance: &api.MaintenancePolicy{
			AutoCompaction: &api.AutoCompaction{Retention: "1h"}}},
			func(t *testing.T, r api.ResolvedMaintenance) {
				if r.AutoCompaction == nil || r.AutoCompaction.Mode != api.AutoCompactionPeriodic || r.AutoCompaction.Retention != "1h" {
					t.Fatalf("auto compaction = %+v", r.AutoCompaction)
				}
			}},
		{"written settings are taken and remembered as written", api.ClusterSpec{Size: 3, Maintenance: &api.MaintenancePolicy{
			Defragmentation: &api.Defragmentation{Schedule: "@daily", FreeSpacePercent: new(int32(0)), MinFreeSpace: &free},
			CorruptionCheck: &api.CorruptionCheck{Initial: new(false), PeriodicInterval: &metav1.Duration{}, CompactHashCheck: new(false)},
		}}, func(t *testing.T, r api.ResolvedMaintenance) {
			if r.DefragSchedule != "@daily" || r.DefragFreeSpacePercent != 0 || r.DefragMinFreeSpaceBytes != 1<<20 ||
				r.InitialCorruptCheck || r.CorruptCheckInterval != 0 || r.CompactHashCheck ||
				!r.ExplicitInitialCorruptCheck || !r.ExplicitCorruptCheckInterval || !r.ExplicitCompactHashCheck {
				t.Fatalf("resolved = %+v", r)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.spec.DeepCopy()
			tt.check(t, tt.spec.ResolvedMaintenance())
			if !equality.Semantic.DeepEqual(before, &tt.spec) {
				t.Fatal("ResolvedMaintenance changed the spec")
			}
		})
	}
}
