package cluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// memberID gives every test member a stable etcd ID derived from its name.
func memberID(name string) uint64 {
	var h uint64 = 1469598103934665603
	for _, b := range []byte(name) {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h
}

// fakeEtcd is the EtcdAPI of the tests: a membership in memory with
// switches for every failure the loop has to cope with.
type fakeEtcd struct {
	mu      sync.Mutex
	members []*etcdserverpb.Member
	leader  uint64
	// down members do not answer health checks; neither do podless ones,
	// whose pod does not run (the fixture sets them before each pass from
	// its pods), unless they are in answering (a pod the cache has not shown).
	down, podless, answering map[uint64]bool
	// noQuorum makes health report no leader and failed quorum reads.
	noQuorum bool
	// errors returned by the calls; nil means success.
	listErr, addErr, removeErr, leaderErr, healthErr, promoteErr error
	// addReplyLost makes an add succeed in etcd but fail for its caller.
	addReplyLost bool
	// stale maps a member to the names its own, lagging, view of the
	// membership holds; a list asked of it answers that view.
	stale map[string][]string
	// Day-2 facts: the cluster version, each member's database sizes, the
	// active alarms, and whether a downgrade is enabled.
	clusterVersion      string
	dbSize, dbSizeInUse map[uint64]int64
	alarms              []etcdutil.Alarm
	downgrade           string
	revision            int64
	calls               []string
	// changedThrough are the endpoints each membership change (add,
	// promote, remove) was sent through, in order.
	changedThrough [][]string
	// healthAddresses are the addresses the last health read was given
	// for the members' names.
	healthAddresses map[string]string
}

func (f *fakeEtcd) record(call string) {
	f.calls = append(f.calls, call)
}

// Calls returns the calls made so far, except reads when onlyWrites is set.
func (f *fakeEtcd) Calls(onlyWrites bool) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if onlyWrites && (c == "list" || c == "health") {
			continue
		}
		out = append(out, c)
	}
	return out
}

func (f *fakeEtcd) MemberList(ctx context.Context, cc etcdutil.ClientConfig) ([]*etcdserverpb.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("list")
	if f.listErr != nil {
		return nil, f.listErr
	}
	var view []string
	if len(cc.Endpoints) > 0 {
		asked, _ := etcdutil.MemberNameFromPeerURL(cc.Endpoints[0])
		view = f.stale[asked]
	}
	var out []*etcdserverpb.Member
	for _, m := range f.members {
		if view != nil && !slices.Contains(view, nameOf(m)) {
			continue
		}
		out = append(out, &etcdserverpb.Member{ID: m.ID, Name: m.Name, PeerURLs: slices.Clone(m.PeerURLs), ClientURLs: slices.Clone(m.ClientURLs), IsLearner: m.IsLearner})
	}
	return out, nil
}

func (f *fakeEtcd) MemberAdd(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.add("add", cc, peerURL, false)
}

func (f *fakeEtcd) MemberAddAsLearner(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.add("add-learner", cc, peerURL, true)
	if err != nil {
		return nil, err
	}
	if f.addReplyLost {
		return nil, fmt.Errorf("context deadline exceeded")
	}
	return m, nil
}

func (f *fakeEtcd) MemberUpdatePeerURL(ctx context.Context, cc etcdutil.ClientConfig, id uint64, peerURL string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("update %x %s", id, peerURL))
	f.changedThrough = append(f.changedThrough, slices.Clone(cc.Endpoints))
	for _, m := range f.members {
		if m.ID == id {
			m.PeerURLs = []string{peerURL}
		}
	}
	return nil
}

func (f *fakeEtcd) MemberPromote(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("promote %x", id))
	f.changedThrough = append(f.changedThrough, slices.Clone(cc.Endpoints))
	if f.promoteErr != nil {
		return f.promoteErr
	}
	for _, m := range f.members {
		if m.ID == id {
			m.IsLearner = false
		}
	}
	return nil
}

func (f *fakeEtcd) MemberRemove(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("remove %x", id))
	f.changedThrough = append(f.changedThrough, slices.Clone(cc.Endpoints))
	if f.removeErr != nil {
		return f.removeErr
	}
	f.members = slices.DeleteFunc(f.members, func(m *etcdserverpb.Member) bool { return m.ID == id })
	return nil
}

func (f *fakeEtcd) LeaderID(ctx context.Context, cc etcdutil.ClientConfig) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("leader")
	if f.leaderErr != nil {
		return 0, f.leaderErr
	}
	if f.noQuorum || f.leader == 0 {
		return 0, etcdutil.ErrNoLeader
	}
	return f.leader, nil
}

func (f *fakeEtcd) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("health")
	f.healthAddresses = cc.Addresses
	if f.healthErr != nil {
		return etcdutil.Health{}, f.healthErr
	}
	var h etcdutil.Health
	for _, m := range f.members {
		mh := etcdutil.MemberHealth{ID: m.ID, Name: m.Name, IsLearner: m.IsLearner, PeerURLs: slices.Clone(m.PeerURLs)}
		switch {
		case len(m.ClientURLs) == 0:
			mh.Err = fmt.Errorf("member has not started")
		case f.down[m.ID] || f.podless[m.ID] && !f.answering[m.ID]:
			mh.Err = fmt.Errorf("connection refused")
		default:
			mh.ClientURL = m.ClientURLs[0]
			mh.Version = testVersion
			if !f.noQuorum {
				mh.Leader = f.leader
			}
			mh.DBSize, mh.DBSizeInUse = f.dbSize[m.ID], f.dbSizeInUse[m.ID]
			mh.Alarms = slices.Clone(f.alarms)
			mh.Revision = f.revision
		}
		h.Members = append(h.Members, mh)
	}
	if f.noQuorum {
		h.ReadErr = fmt.Errorf("context deadline exceeded")
	} else {
		h.Linearizable = true
		h.LeaderID = f.leader
	}
	h.Alarms = slices.Clone(f.alarms)
	return h, nil
}

func (f *fakeEtcd) ClusterVersion(ctx context.Context, cc etcdutil.ClientConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clusterVersion == "" {
		return "3.5.0", nil
	}
	return f.clusterVersion, nil
}

func (f *fakeEtcd) MoveLeader(ctx context.Context, cc etcdutil.ClientConfig, toID uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("move-leader %x", toID))
	f.leader = toID
	return nil
}

func (f *fakeEtcd) Compact(ctx context.Context, cc etcdutil.ClientConfig) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("compact")
	return f.revision, nil
}

func (f *fakeEtcd) Defragment(ctx context.Context, cc etcdutil.ClientConfig, endpoint string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, _ := etcdutil.MemberNameFromPeerURL(endpoint)
	f.record("defragment " + name)
	id := memberID(name)
	f.dbSize[id] = f.dbSizeInUse[id]
	return nil
}

func (f *fakeEtcd) DisarmNoSpace(ctx context.Context, cc etcdutil.ClientConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("disarm")
	f.alarms = nil
	return nil
}

func (f *fakeEtcd) EnableDowngrade(ctx context.Context, cc etcdutil.ClientConfig, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("downgrade " + target)
	f.downgrade = target
	return nil
}

// start marks a member as started (it has a name and client URL), as etcd
// does once the member's process has joined.
func (f *fakeEtcd) start(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.ID == memberID(name) {
			m.Name = name
			m.ClientURLs = []string{"http://" + name + ":2379"}
		}
	}
}

func nameOf(m *etcdserverpb.Member) string {
	n, _ := etcdutil.MemberNameFromPeerURL(m.PeerURLs[0])
	return n
}

func (f *fakeEtcd) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.members {
		n, _ := etcdutil.MemberNameFromPeerURL(m.PeerURLs[0])
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (f *fixture) etcdWrites() []string { return f.etcd.Calls(true) }

// addCall and removeCall are what fakeEtcd records for a member change.
func (f *fixture) addCall(name string) string { return "add " + f.member(name).PeerURL() }

func (f *fixture) learnerCall(name string) string {
	return "add-learner " + f.member(name).PeerURL()
}

func promoteCall(name string) string { return fmt.Sprintf("promote %x", memberID(name)) }

func removeCall(name string) string { return fmt.Sprintf("remove %x", memberID(name)) }

// add records an add sent through cc and, unless addErr says etcd refuses
// it, adds the member; f.mu is held.
func (f *fakeEtcd) add(call string, cc etcdutil.ClientConfig, peerURL string, learner bool) (*etcdserverpb.Member, error) {
	f.record(call + " " + peerURL)
	f.changedThrough = append(f.changedThrough, slices.Clone(cc.Endpoints))
	if f.addErr != nil {
		return nil, f.addErr
	}
	name, _ := etcdutil.MemberNameFromPeerURL(peerURL)
	m := &etcdserverpb.Member{ID: memberID(name), PeerURLs: []string{peerURL}, IsLearner: learner}
	f.members = append(f.members, m)
	return m, nil
}
