package etcdutil

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultDefragmentTimeout bounds one member's defragmentation when the
// caller's context has no earlier deadline. etcd rewrites the whole database
// file and blocks the member's reads and writes meanwhile (about a second per
// few hundred MB on ordinary disks), so the usual request timeout is far too
// short for it.
const DefaultDefragmentTimeout = 5 * time.Minute

// MaxTransfereeLag is how many raft entries a follower may be behind the
// leader's commit index and still be handed leadership. raft only hands over
// to a follower whose log matches the leader's, and etcd's MoveLeader waits
// for that until its context ends; a follower this close catches up within a
// heartbeat, one further behind would make the move time out instead.
const MaxTransfereeLag = 1000

// ErrNotTransferee means the member asked to take over leadership is not a
// healthy, caught-up voting follower.
var ErrNotTransferee = errors.New("member cannot take over leadership")

// CompactToCurrent compacts the key-value history up to the current
// revision, keeping only the latest version of each key, and waits until the
// compaction has reached every member's database (physical), so that a
// defragmentation afterwards gives the freed pages back. It returns the
// revision compacted to. A history already compacted to that revision is
// not an error.
func CompactToCurrent(ctx context.Context, cfg ClientConfig) (int64, error) {
	rev, err := call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (int64, error) {
		// A linearizable read: the revision is the cluster's latest, not a
		// lagging member's.
		get, err := c.Get(ctx, healthKey, clientv3.WithCountOnly())
		if err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) {
			return 0, fmt.Errorf("current revision: %w", err)
		}
		if get == nil {
			return 0, fmt.Errorf("current revision: %w", err)
		}
		rev := get.Header.Revision
		_, err = c.Compact(ctx, rev, clientv3.WithCompactPhysical())
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return 0, err
		}
		return rev, nil
	})
	if err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	return rev, nil
}

// Defragment rewrites one member's database file without its free pages,
// which shrinks DBSize to about DBSizeInUse. Only endpoint is contacted
// (cfg.Endpoints is ignored). The member serves nothing while it runs, so
// defragment one member at a time and the leader last, after moving
// leadership away. The context bounds it; without a deadline
// DefaultDefragmentTimeout does.
func Defragment(ctx context.Context, cfg ClientConfig, endpoint string) error {
	c, err := NewClientContext(ctx, cfg.withEndpoints(endpoint))
	if err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	defer func() { _ = c.Close() }()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDefragmentTimeout)
		defer cancel()
	}
	if _, err := c.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}

// CheckTransferee tells whether candidate can take over leadership from
// leader right now: it answered, votes, follows this leader and is at most
// MaxTransfereeLag entries behind the leader's commit index. The error
// wraps ErrNotTransferee and says why not.
func CheckTransferee(leader, candidate MemberHealth) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: member %x %s", ErrNotTransferee, candidate.ID, fmt.Sprintf(format, args...))
	}
	switch {
	case candidate.ID == leader.ID:
		return refuse("is the leader already")
	case candidate.Err != nil:
		return refuse("does not answer: %v", candidate.Err)
	case candidate.IsLearner:
		return refuse("is a learner and does not vote")
	case candidate.Leader != leader.ID:
		return refuse("follows leader %x, not %x", candidate.Leader, leader.ID)
	case leader.RaftIndex > candidate.RaftAppliedIndex+MaxTransfereeLag:
		return refuse("has applied index %d, more than %d behind the leader's %d",
			candidate.RaftAppliedIndex, MaxTransfereeLag, leader.RaftIndex)
	}
	return nil
}

// MoveLeaderTo hands leadership to member toID after checking, on a fresh
// look at the cluster, that it is a healthy, caught-up follower
// (CheckTransferee). Moving leadership to the leader is a no-op. The request
// goes to the leader, the only member etcd accepts it from.
func MoveLeaderTo(ctx context.Context, cfg ClientConfig, toID uint64) error {
	h, err := ClusterHealth(ctx, cfg)
	if err != nil {
		return fmt.Errorf("move leader to %x: %w", toID, err)
	}
	if h.LeaderID == 0 {
		return fmt.Errorf("move leader to %x: %w", toID, ErrNoLeader)
	}
	if h.LeaderID == toID {
		return nil
	}
	leader, ok := h.Member(h.LeaderID)
	if !ok || leader.Err != nil {
		return fmt.Errorf("move leader to %x: the leader %x does not answer", toID, h.LeaderID)
	}
	candidate, ok := h.Member(toID)
	if !ok {
		return fmt.Errorf("move leader to %x: %w: no such member", toID, ErrNotTransferee)
	}
	if err := CheckTransferee(leader, candidate); err != nil {
		return fmt.Errorf("move leader to %x: %w", toID, err)
	}
	return MoveLeader(ctx, cfg, leader.ClientURL, toID)
}

// Member returns the report of member id.
func (h Health) Member(id uint64) (MemberHealth, bool) {
	for _, m := range h.Members {
		if m.ID == id {
			return m, true
		}
	}
	return MemberHealth{}, false
}

// HashCheck is the outcome of comparing the members' key-value hashes at
// one revision.
type HashCheck struct {
	// Revision is the revision every answering member hashed.
	Revision int64
	// Members has one entry per member asked, sorted by ID.
	Members []MemberHash
	// Mismatched lists the members whose hash differs from the one most
	// members agree on (compared only among members with the same compact
	// revision, since the hash covers the history after it).
	Mismatched []uint64
	// Inconclusive is set when fewer than two members could be compared,
	// for instance because a compaction ran between the requests.
	Inconclusive bool
}

// MemberHash is one member's answer to HashKV.
type MemberHash struct {
	ID              uint64
	ClientURL       string
	Hash            uint32
	CompactRevision int64
	Err             error
}

// CheckHashKV asks every started member for the hash of its key-value store
// at the same revision, the lowest revision all of them have reached, and
// reports which members disagree with the majority. This is the check
// etcd's own corruption detection runs; here it runs on demand. It needs
// quorum only to list the members.
func CheckHashKV(ctx context.Context, cfg ClientConfig) (HashCheck, error) {
	h, err := ClusterHealth(ctx, cfg)
	if err != nil {
		return HashCheck{}, fmt.Errorf("hash check: %w", err)
	}
	var rev int64
	var members []MemberHealth
	for _, m := range h.Members {
		if m.Err != nil {
			continue
		}
		members = append(members, m)
		if rev == 0 || m.Revision < rev {
			rev = m.Revision
		}
	}
	if len(members) == 0 {
		return HashCheck{}, errors.New("hash check: no member answered")
	}
	out := HashCheck{Revision: rev, Members: make([]MemberHash, len(members))}
	var wg sync.WaitGroup
	for i, m := range members {
		out.Members[i] = MemberHash{ID: m.ID, ClientURL: m.ClientURL}
		wg.Go(func() {
			resp, err := call(ctx, cfg.withEndpoints(m.ClientURL), func(ctx context.Context, c *clientv3.Client) (*clientv3.HashKVResponse, error) {
				return c.HashKV(ctx, m.ClientURL, rev)
			})
			if err != nil {
				out.Members[i].Err = fmt.Errorf("hash kv %s: %w", m.ClientURL, err)
				return
			}
			if resp.Header.MemberId != m.ID {
				out.Members[i].Err = fmt.Errorf("hash kv %s: answered as member %x, not %x", m.ClientURL, resp.Header.MemberId, m.ID)
				return
			}
			out.Members[i].Hash = resp.Hash
			out.Members[i].CompactRevision = resp.CompactRevision
		})
	}
	wg.Wait()
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ID < out.Members[j].ID })
	out.Mismatched, out.Inconclusive = compareHashes(out.Members)
	return out, nil
}

// compareHashes groups the members that answered by compact revision, takes
// the largest group (the one most members can be compared in) and, within
// it, the hash most members share. Members of that group with another hash
// are mismatched. A tie between two hashes cannot say which side is right,
// so every member of the tie is reported.
func compareHashes(ms []MemberHash) (mismatched []uint64, inconclusive bool) {
	byCompact := map[int64][]MemberHash{}
	for _, m := range ms {
		if m.Err == nil {
			byCompact[m.CompactRevision] = append(byCompact[m.CompactRevision], m)
		}
	}
	var group []MemberHash
	for _, g := range byCompact {
		if len(g) > len(group) || len(g) == len(group) && len(g) > 0 && g[0].CompactRevision > group[0].CompactRevision {
			group = g
		}
	}
	if len(group) < 2 {
		return nil, true
	}
	counts := map[uint32]int{}
	for _, m := range group {
		counts[m.Hash]++
	}
	best, bestN, tie := uint32(0), 0, false
	for hash, n := range counts {
		switch {
		case n > bestN:
			best, bestN, tie = hash, n, false
		case n == bestN:
			tie = true
		}
	}
	for _, m := range group {
		if tie || m.Hash != best {
			if len(counts) > 1 {
				mismatched = append(mismatched, m.ID)
			}
		}
	}
	sort.Slice(mismatched, func(i, j int) bool { return mismatched[i] < mismatched[j] })
	return mismatched, false
}
