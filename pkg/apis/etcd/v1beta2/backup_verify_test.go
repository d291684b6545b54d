package v1beta2_test

import (
	"testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func TestVerifyEvery(t *testing.T) {
	yes, no := true, false
	periodic := &api.BackupPolicy{BackupIntervalInSecond: 60}
	for _, c := range []struct {
		name   string
		policy *api.BackupPolicy
		verify *api.BackupVerify
		want   int64
	}{
		{"a one-shot backup is not verified unless asked", nil, nil, 0},
		{"a one-shot backup with a verify block is verified", nil, &api.BackupVerify{}, 1},
		{"a one-shot backup with verification off is not", nil, &api.BackupVerify{Enabled: &no}, 0},
		{"a one-shot backup ignores everyNthBackup", nil, &api.BackupVerify{Enabled: &yes, EveryNthBackup: 5}, 1},
		{"a periodic backup is verified every tenth run by default", periodic, nil, api.DefaultVerifyEveryNthBackup},
		{"a periodic backup with an empty verify block too", periodic, &api.BackupVerify{}, 10},
		{"a periodic backup verifies as often as asked", periodic, &api.BackupVerify{EveryNthBackup: 1}, 1},
		{"a periodic backup with verification off is not", periodic, &api.BackupVerify{Enabled: &no, EveryNthBackup: 3}, 0},
		{"an interval of 0 is one-shot", &api.BackupPolicy{}, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := api.BackupSpec{BackupPolicy: c.policy, Verify: c.verify}
			if got := s.VerifyEvery(); got != c.want {
				t.Fatalf("VerifyEvery = %d, want %d", got, c.want)
			}
		})
	}
}
