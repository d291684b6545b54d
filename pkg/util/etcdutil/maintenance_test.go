package etcdutil

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/protobuf/encoding/protowire"
)

// tinyQuota is a backend quota a test fills in a second: a few hundred puts
// of 4 KiB values.
const tinyQuota = 1 << 20

func TestSpaceMaintenanceRecoversFromNoSpace(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 3, nil, func(cfg *embed.Config) { cfg.QuotaBackendBytes = tinyQuota })
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: c.endpoints()}
	waitHealthy(t, cfg, 3)

	cli, err := NewClientContext(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	value := strings.Repeat("x", 4096)
	var lastErr error
	for i := 0; i < 2000 && lastErr == nil; i++ {
		_, lastErr = cli.Put(ctx, fmt.Sprintf("k%d", i%10), value)
	}
	if !errors.Is(lastErr, rpctypes.ErrNoSpace) {
		t.Fatalf("filling a %d-byte quota ended with %v, want ErrNoSpace", tinyQuota, lastErr)
	}

	var full Health
	// Followers apply the writes, and their backends commit them to the
	// file, a little after the leader: poll until every member is full.
	poll(t, 10*time.Second, "every member reports the NOSPACE alarm and a full database", func() (bool, string) {
		full, err = ClusterHealth(ctx, cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range full.Members {
			if !HasAlarm(m.Alarms, AlarmNoSpace) {
				return false, fmt.Sprintf("%s reports alarms %v", m.Name, m.Alarms)
			}
			if m.DBSize < tinyQuota*9/10 {
				return false, fmt.Sprintf("%s has a database of %d bytes", m.Name, m.DBSize)
			}
		}
		return HasAlarm(full.Alarms, AlarmNoSpace), fmt.Sprint(full.Alarms)
	})
	listed, err := ListAlarms(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(listed, full.Alarms) {
		t.Errorf("AlarmList = %v, but the members' status reports %v", listed, full.Alarms)
	}
	for _, m := range full.Members {
		// etcd refuses the write that would pass the quota, so the file
		// stops just short of it.
		if m.DBSize < tinyQuota*9/10 || m.DBSizeInUse <= 0 || m.DBSizeInUse > m.DBSize || m.RaftAppliedIndex == 0 {
			t.Errorf("%s: DBSize %d, DBSizeInUse %d, applied %d; want a full database", m.Name, m.DBSize, m.DBSizeInUse, m.RaftAppliedIndex)
		}
	}

	rev, err := CompactToCurrent(ctx, cfg)
	if err != nil {
		t.Fatalf("compact while NOSPACE: %v", err)
	}
	if again, err := CompactToCurrent(ctx, cfg); err != nil || again != rev {
		t.Errorf("compacting again at the same revision = %d, %v; want %d, nil", again, err, rev)
	}

	for _, m := range full.Members {
		if err := Defragment(ctx, cfg, m.ClientURL); err != nil {
			t.Fatalf("defragment %s: %v", m.Name, err)
		}
	}
	after, err := ClusterHealth(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range after.Members {
		// Ten 4 KiB keys are left after compaction.
		if m.DBSize >= tinyQuota/2 {
			t.Errorf("%s: DBSize %d after compaction and defragmentation, want well under the quota", m.Name, m.DBSize)
		}
	}
	if !HasAlarm(after.Alarms, AlarmNoSpace) {
		t.Fatalf("the alarm went away without being disarmed: %v", after.Alarms)
	}

	disarmed, err := DisarmNoSpace(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(disarmed, full.Alarms) {
		t.Errorf("disarmed %v, want %v", disarmed, full.Alarms)
	}
	poll(t, 10*time.Second, "no member reports an alarm", func() (bool, string) {
		h, err := ClusterHealth(ctx, cfg)
		return err == nil && len(h.Alarms) == 0, fmt.Sprintf("%v, %v", h.Alarms, err)
	})
	if _, err := cli.Put(ctx, "after", "space is back"); err != nil {
		t.Fatalf("put after disarming: %v", err)
	}
	if again, err := DisarmNoSpace(ctx, cfg); err != nil || len(again) != 0 {
		t.Errorf("disarming with no alarm = %v, %v; want nothing, nil", again, err)
	}
}

func TestMoveLeaderTo(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: c.endpoints()}
	waitHealthy(t, cfg, 3)

	h, err := ClusterHealth(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var follower uint64
	for _, m := range h.Members {
		if m.ID != h.LeaderID {
			follower = m.ID
			break
		}
	}
	// Members asked one by one at addresses of the caller's choosing give
	// the same picture.
	var one []MemberHealth
	for _, ep := range c.endpoints() {
		one = append(one, MemberStatus(ctx, ClientConfig{}, ep))
	}
	assembled := HealthOf(one)
	if assembled.LeaderID != h.LeaderID || len(assembled.Members) != 3 || assembled.Linearizable {
		t.Fatalf("HealthOf(MemberStatus...) = %+v; want leader %x, 3 members, no claim of a quorum read", assembled, h.LeaderID)
	}
	for _, m := range assembled.Members {
		if m.Err != nil || m.ID == 0 || m.Version == "" || m.DBSize == 0 {
			t.Errorf("MemberStatus = %+v", m)
		}
	}
	if dead := MemberStatus(ctx, ClientConfig{DialTimeout: shortDial}, deadEndpoint(t)); dead.Err == nil {
		t.Errorf("MemberStatus of a dead endpoint = %+v, want Err set", dead)
	}

	if err := MoveLeaderTo(ctx, cfg, h.LeaderID); err != nil {
		t.Errorf("moving leadership to the leader = %v, want nil", err)
	}
	if err := MoveLeaderTo(ctx, cfg, 0xdead); !errors.Is(err, ErrNotTransferee) {
		t.Errorf("moving leadership to an unknown member = %v, want ErrNotTransferee", err)
	}
	if err := MoveLeaderTo(ctx, cfg, follower); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the follower leads", func() (bool, string) {
		id, err := LeaderID(ctx, cfg)
		return err == nil && id == follower, fmt.Sprintf("leader %x, %v", id, err)
	})
}

func TestCheckTransferee(t *testing.T) {
	leader := MemberHealth{ID: 1, Leader: 1, RaftIndex: 5000, RaftAppliedIndex: 5000}
	follower := func(change func(*MemberHealth)) MemberHealth {
		m := MemberHealth{ID: 2, Leader: 1, RaftIndex: 5000, RaftAppliedIndex: 4990}
		if change != nil {
			change(&m)
		}
		return m
	}
	tests := []struct {
		name      string
		candidate MemberHealth
		refusal   string
	}{
		{"a caught-up follower can take over", follower(nil), ""},
		{"a follower just within the lag can take over", follower(func(m *MemberHealth) { m.RaftAppliedIndex = 5000 - MaxTransfereeLag }), ""},
		{"a follower further behind cannot", follower(func(m *MemberHealth) { m.RaftAppliedIndex = 5000 - MaxTransfereeLag - 1 }), "behind the leader"},
		{"a member that does not answer cannot", follower(func(m *MemberHealth) { m.Err = errors.New("down") }), "does not answer"},
		{"a learner cannot", follower(func(m *MemberHealth) { m.IsLearner = true }), "learner"},
		{"a member following another leader cannot", follower(func(m *MemberHealth) { m.Leader = 3 }), "follows leader 3"},
		{"the leader itself cannot", leader, "is the leader already"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTransferee(leader, tt.candidate)
			if tt.refusal == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNotTransferee) || !strings.Contains(err.Error(), tt.refusal) {
				t.Fatalf("error %v, want ErrNotTransferee saying %q", err, tt.refusal)
			}
		})
	}
}

func TestCheckHashKVFindsTheCorruptMember(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: c.endpoints()}
	waitHealthy(t, cfg, 3)
	cli, err := NewClientContext(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%d", i), "value"); err != nil {
			t.Fatal(err)
		}
	}

	check, err := CheckHashKV(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(check.Mismatched) != 0 || check.Inconclusive || len(check.Members) != 3 || check.Revision < 21 {
		t.Fatalf("healthy cluster: %+v; want three agreeing members at revision >= 21", check)
	}

	// Corrupt one follower's copy of a value behind etcd's back, the way a
	// bad disk would, and start it again.
	leader, err := LeaderID(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.members[0]
	if victim.id() == leader {
		victim = c.members[1]
	}
	victim.stop()
	corruptOneValue(t, filepath.Join(victim.dir, "member", "snap", "db"))
	c.restart(victim)
	waitHealthy(t, cfg, 3)

	check, err = CheckHashKV(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(check.Mismatched, []uint64{victim.id()}) {
		t.Fatalf("after corrupting %s (%x): %+v; want only it mismatched", victim.name, victim.id(), check)
	}
}

// corruptOneValue changes the latest stored value in an etcd database file
// whose owner is stopped, keeping the record readable.
func corruptOneValue(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("no key bucket")
		}
		k, v := b.Cursor().Last()
		if k == nil {
			return errors.New("empty key bucket")
		}
		var kv mvccpb.KeyValue
		if err := kv.Unmarshal(v); err != nil {
			return err
		}
		kv.Value = append(bytes.Clone(kv.Value), " (bit rot)"...)
		bad, err := kv.Marshal()
		if err != nil {
			return err
		}
		return b.Put(bytes.Clone(k), bad)
	})
	if err != nil {
		t.Fatalf("corrupt %s: %v", path, err)
	}
}

func TestCompareHashes(t *testing.T) {
	m := func(id uint64, hash uint32, compact int64) MemberHash {
		return MemberHash{ID: id, Hash: hash, CompactRevision: compact}
	}
	down := MemberHash{ID: 9, Err: errors.New("down")}
	tests := []struct {
		name         string
		members      []MemberHash
		mismatched   []uint64
		inconclusive bool
	}{
		{"agreeing members mismatch nothing", []MemberHash{m(1, 7, 0), m(2, 7, 0), m(3, 7, 0)}, nil, false},
		{"the odd one out is mismatched", []MemberHash{m(1, 7, 0), m(2, 8, 0), m(3, 7, 0)}, []uint64{2}, false},
		{"members after another compaction are not compared", []MemberHash{m(1, 7, 5), m(2, 8, 9), m(3, 7, 5)}, nil, false},
		{"a member that did not answer is not compared", []MemberHash{m(1, 7, 0), down, m(3, 7, 0)}, nil, false},
		{"a tie reports both sides", []MemberHash{m(1, 7, 0), m(2, 8, 0)}, []uint64{1, 2}, false},
		{"a single comparable member is inconclusive", []MemberHash{m(1, 7, 0), down, m(3, 7, 4)}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, inconclusive := compareHashes(tt.members)
			if !reflect.DeepEqual(got, tt.mismatched) || inconclusive != tt.inconclusive {
				t.Fatalf("compareHashes = %v, %v; want %v, %v", got, inconclusive, tt.mismatched, tt.inconclusive)
			}
		})
	}
}

func TestParseStatusAlarms(t *testing.T) {
	tests := []struct {
		name string
		errs []string
		want []Alarm
	}{
		{"no errors, no alarms", nil, nil},
		{"an alarm in etcd's text form", []string{"memberID:10276657743932975437 alarm:NOSPACE "}, []Alarm{{10276657743932975437, AlarmNoSpace}}},
		{"other errors are skipped", []string{"etcdserver: no leader", "memberID:2 alarm:CORRUPT"}, []Alarm{{2, AlarmCorrupt}}},
		{"alarms are sorted by type then member", []string{"memberID:3 alarm:NOSPACE", "memberID:2 alarm:NOSPACE", "memberID:9 alarm:CORRUPT"},
			[]Alarm{{9, AlarmCorrupt}, {2, AlarmNoSpace}, {3, AlarmNoSpace}}},
		{"a malformed member ID is skipped", []string{"memberID:x alarm:NOSPACE"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseStatusAlarms(tt.errs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseStatusAlarms = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatusFieldsOf36(t *testing.T) {
	var downgrade []byte
	downgrade = protowire.AppendTag(downgrade, downgradeFieldEnabled, protowire.VarintType)
	downgrade = protowire.AppendVarint(downgrade, 1)
	downgrade = protowire.AppendTag(downgrade, downgradeFieldTargetVersion, protowire.BytesType)
	downgrade = protowire.AppendString(downgrade, "3.5.0")
	var b []byte
	b = protowire.AppendTag(b, statusFieldStorageVersion, protowire.BytesType)
	b = protowire.AppendString(b, "3.6.0")
	b = protowire.AppendTag(b, statusFieldDBSizeQuota, protowire.VarintType)
	b = protowire.AppendVarint(b, 2<<30)
	b = protowire.AppendTag(b, 99, protowire.Fixed32Type) // a field from a later etcd
	b = protowire.AppendFixed32(b, 7)
	b = protowire.AppendTag(b, statusFieldDowngradeInfo, protowire.BytesType)
	b = protowire.AppendBytes(b, downgrade)

	storage, quota, info := statusFieldsOf36(b)
	if storage != "3.6.0" || quota != 2<<30 || info != (DowngradeInfo{Enabled: true, TargetVersion: "3.5.0"}) {
		t.Fatalf("decoded %q, %d, %+v", storage, quota, info)
	}
	if s, q, i := statusFieldsOf36(b[:len(b)-3]); s != "3.6.0" || q != 2<<30 || i.Enabled {
		t.Errorf("a truncated message gave %q, %d, %+v; want the fields before the damage", s, q, i)
	}
	if s, q, i := statusFieldsOf36(nil); s != "" || q != 0 || i != (DowngradeInfo{}) {
		t.Errorf("a 3.5 member's status gave %q, %d, %+v; want zero values", s, q, i)
	}
}

func TestVersions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: c.endpoints()}
	// etcd decides the cluster version a moment after its leader is elected;
	// until then it reports "not_decided".
	var v VersionInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if v, err = EndpointVersion(ctx, cfg, c.members[0].clientURL); err != nil {
			t.Fatal(err)
		}
		if v.Cluster != "not_decided" || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(v.Server, "3.5.") || v.Cluster != "3.5.0" {
		t.Fatalf("version = %+v, want a 3.5 server in a 3.5.0 cluster", v)
	}
	cv, err := ClusterVersion(ctx, ClientConfig{Endpoints: []string{deadEndpoint(t), c.members[0].clientURL}, RequestTimeout: shortRequest})
	if err != nil || cv != "3.5.0" {
		t.Fatalf("ClusterVersion past a dead endpoint = %q, %v; want 3.5.0", cv, err)
	}
	if _, err := ClusterVersion(ctx, ClientConfig{Endpoints: []string{deadEndpoint(t)}, RequestTimeout: shortRequest}); err == nil {
		t.Fatal("ClusterVersion of a dead endpoint succeeded")
	}

	// A 3.5 cluster could only go to 3.4, which etcd 3.5 accepts to
	// validate; anything else is refused without changing the cluster.
	if _, err := DowngradeValidate(ctx, cfg, "3.3"); err == nil {
		t.Error("validating a downgrade by two minor versions succeeded")
	}
	if _, err := DowngradeCancel(ctx, cfg); err == nil {
		t.Error("cancelling a downgrade that was never enabled succeeded")
	}
}
