package cluster

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// etcdHealthInterval is etcd's etcdserver.HealthInterval: with its strict
// reconfiguration check (on by default) etcd refuses MemberAdd with
// "unhealthy cluster" unless every voting member has been connected to the
// leader for this long. The original met that refusal on every bootstrap.
const etcdHealthInterval = 5 * time.Second

// EtcdAPI is everything a pass asks etcd. It is an interface so that passes
// can be tested against a fake; NewEtcdAPI is the real one. Every call dials
// the endpoints in cc and closes the connection again.
type EtcdAPI interface {
	// MemberList returns the membership as the member asked first sees it.
	MemberList(ctx context.Context, cc etcdutil.ClientConfig) ([]*etcdserverpb.Member, error)
	// MemberAdd adds a voting member with the given peer URL.
	MemberAdd(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error)
	// MemberAddAsLearner adds a member that does not vote until promoted.
	MemberAddAsLearner(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error)
	// MemberPromote makes a learner vote; etcd refuses while it catches up.
	MemberPromote(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error
	// MemberRemove removes a member; one already gone is not an error.
	// MemberUpdatePeerURL changes the peer URL etcd records for a member.
	MemberUpdatePeerURL(ctx context.Context, cc etcdutil.ClientConfig, id uint64, peerURL string) error
	MemberRemove(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error
	// ClusterHealth reports leader, quorum and every member's own state:
	// versions, database sizes, alarms.
	ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error)
	// ClusterVersion is the version the members agreed on ("3.5.0").
	ClusterVersion(ctx context.Context, cc etcdutil.ClientConfig) (string, error)
	// MoveLeader hands leadership to member toID.
	MoveLeader(ctx context.Context, cc etcdutil.ClientConfig, toID uint64) error
	// Compact compacts the history up to the current revision, which it
	// returns.
	Compact(ctx context.Context, cc etcdutil.ClientConfig) (int64, error)
	// Defragment defragments the member serving endpoint.
	Defragment(ctx context.Context, cc etcdutil.ClientConfig, endpoint string) error
	// DisarmNoSpace disarms the NOSPACE alarms.
	DisarmNoSpace(ctx context.Context, cc etcdutil.ClientConfig) error
	// EnableDowngrade validates, then enables, a downgrade of the cluster
	// version to target ("3.5").
	EnableDowngrade(ctx context.Context, cc etcdutil.ClientConfig, target string) error
}

// NewEtcdAPI returns the EtcdAPI that talks to real etcd through etcdutil.
func NewEtcdAPI() EtcdAPI { return etcdutilAPI{} }

type etcdutilAPI struct{}

func (etcdutilAPI) MemberList(ctx context.Context, cc etcdutil.ClientConfig) ([]*etcdserverpb.Member, error) {
	resp, err := etcdutil.ListMembers(ctx, cc)
	if err != nil {
		return nil, err
	}
	return resp.Members, nil
}

func (etcdutilAPI) MemberAdd(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	return etcdutil.AddMember(ctx, cc, peerURL)
}

func (etcdutilAPI) MemberAddAsLearner(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	return etcdutil.AddLearner(ctx, cc, peerURL)
}

func (etcdutilAPI) MemberUpdatePeerURL(ctx context.Context, cc etcdutil.ClientConfig, id uint64, peerURL string) error {
	return etcdutil.UpdateMemberPeerURL(ctx, cc, id, peerURL)
}

func (etcdutilAPI) MemberPromote(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	return etcdutil.PromoteMember(ctx, cc, id)
}

func (etcdutilAPI) MemberRemove(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	return etcdutil.RemoveMember(ctx, cc, id)
}

func (etcdutilAPI) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	return etcdutil.ClusterHealth(ctx, cc)
}

func (etcdutilAPI) ClusterVersion(ctx context.Context, cc etcdutil.ClientConfig) (string, error) {
	return etcdutil.ClusterVersion(ctx, cc)
}

func (etcdutilAPI) MoveLeader(ctx context.Context, cc etcdutil.ClientConfig, toID uint64) error {
	return etcdutil.MoveLeaderTo(ctx, cc, toID)
}

func (etcdutilAPI) Compact(ctx context.Context, cc etcdutil.ClientConfig) (int64, error) {
	return etcdutil.CompactToCurrent(ctx, cc)
}

func (etcdutilAPI) Defragment(ctx context.Context, cc etcdutil.ClientConfig, endpoint string) error {
	return etcdutil.Defragment(ctx, cc, endpoint)
}

func (etcdutilAPI) DisarmNoSpace(ctx context.Context, cc etcdutil.ClientConfig) error {
	_, err := etcdutil.DisarmNoSpace(ctx, cc)
	return err
}

func (etcdutilAPI) EnableDowngrade(ctx context.Context, cc etcdutil.ClientConfig, target string) error {
	if _, err := etcdutil.DowngradeValidate(ctx, cc, target); err != nil {
		return err
	}
	_, err := etcdutil.DowngradeEnable(ctx, cc, target)
	return err
}

// isNotReadyForChange recognises etcd's refusals of a membership change that
// only mean "not now": its strict reconfiguration check wants every voting
// member connected and enough of them started, a learner is promoted only
// once it has caught up with the leader, and a learner is added only while
// the membership holds fewer than etcd allows (every member refuses it alike
// as it applies the change, so the membership is unchanged). They are waited out, not reported.
func isNotReadyForChange(err error) bool {
	for _, refusal := range []error{rpctypes.ErrUnhealthy, rpctypes.ErrMemberNotEnoughStarted, rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrTooManyLearners} {
		// The text check covers a refusal that reached us as a raw gRPC
		// status rather than as the client's typed error.
		if errors.Is(err, refusal) || strings.Contains(err.Error(), refusal.Error()) {
			return true
		}
	}
	return false
}

// etcdView is what etcd said in one pass.
type etcdView struct {
	// err is why etcd could not be asked; nothing else is set then.
	err error
	// health is every member's answer about itself.
	health etcdutil.Health
	// confirmed is set when the membership was read from the leader in this
	// pass: only then is it good enough for a change (etcd before 3.5 serves
	// member lists from the local member, which may lag).
	confirmed bool
	// clusterVersion is the version the members agreed on ("3.5.0"), ""
	// when it could not be read.
	clusterVersion string
}

// healthOf is what member id said of itself in this pass.
func (e *etcdView) healthOf(id uint64) (etcdutil.MemberHealth, bool) {
	if e == nil || e.err != nil {
		return etcdutil.MemberHealth{}, false
	}
	return e.health.Member(id)
}

// hasAlarm tells whether etcd reported an active alarm of type typ.
func (e *etcdView) hasAlarm(typ string) bool {
	return e != nil && e.err == nil && etcdutil.HasAlarm(e.health.Alarms, typ)
}

// alarmFor tells whether etcd reported an alarm of type typ for member id.
func (e *etcdView) alarmFor(id uint64, typ string) bool {
	if e == nil || e.err != nil {
		return false
	}
	for _, a := range e.health.Alarms {
		if a.MemberID == id && a.Type == typ {
			return true
		}
	}
	return false
}

// leaderless tells whether etcd answered in this pass and no member that
// answered reports a leader, not even one a minority still believes in.
func (e *etcdView) leaderless() bool {
	_, ok := e.leaderReported()
	return e != nil && e.err == nil && !ok
}

// leaderReported is the first member that answered with a leader, if any.
func (e *etcdView) leaderReported() (etcdutil.MemberHealth, bool) {
	if e == nil || e.err != nil {
		return etcdutil.MemberHealth{}, false
	}
	for _, m := range e.health.Members {
		if m.Err == nil && m.Leader != 0 {
			return m, true
		}
	}
	if e.health.LeaderID != 0 {
		return etcdutil.MemberHealth{ID: e.health.LeaderID, Leader: e.health.LeaderID}, true
	}
	return etcdutil.MemberHealth{}, false
}

// answers tells whether member id answered etcd's status call this pass.
func (e *etcdView) answers(id uint64) bool {
	if e == nil || e.err != nil {
		return false
	}
	for _, m := range e.health.Members {
		if m.ID == id {
			return m.Err == nil
		}
	}
	return false
}
