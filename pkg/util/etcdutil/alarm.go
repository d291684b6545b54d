package etcdutil

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Alarm types etcd raises. NOSPACE: the database reached its quota, so the
// cluster refuses every write but deletions and compactions until the alarm
// is disarmed. CORRUPT: the corruption check found a member whose data
// differs from the others'; the cluster refuses writes until it is disarmed,
// which only makes sense once the member has been replaced.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// Alarm is one active alarm: which member raised it and of which type.
type Alarm struct {
	MemberID uint64
	Type     string
}

func (a Alarm) String() string { return fmt.Sprintf("%s on member %x", a.Type, a.MemberID) }

// ListAlarms asks the cluster for its active alarms. In etcd 3.5 and before
// the request goes through raft, so it needs a quorum and adds a log entry;
// ClusterHealth gets the same list from the members' status for free.
func ListAlarms(ctx context.Context, cfg ClientConfig) ([]Alarm, error) {
	resp, err := call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (*clientv3.AlarmResponse, error) {
		return c.AlarmList(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("alarm list: %w", err)
	}
	return alarmsOf(resp.Alarms), nil
}

// DisarmNoSpace disarms every NOSPACE alarm and returns the ones it
// disarmed. Only call it once the members' databases are back under the
// quota (compacted and defragmented): etcd raises the alarm again at the
// first write that does not fit. CORRUPT alarms are left alone on purpose.
func DisarmNoSpace(ctx context.Context, cfg ClientConfig) ([]Alarm, error) {
	return call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) ([]Alarm, error) {
		list, err := c.AlarmList(ctx)
		if err != nil {
			return nil, fmt.Errorf("disarm NOSPACE: alarm list: %w", err)
		}
		var disarmed []Alarm
		for _, a := range alarmsOf(list.Alarms) {
			if a.Type != AlarmNoSpace {
				continue
			}
			_, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: etcdserverpb.AlarmType_NOSPACE})
			if err != nil {
				return disarmed, fmt.Errorf("disarm %s: %w", a, err)
			}
			disarmed = append(disarmed, a)
		}
		return disarmed, nil
	})
}

func alarmsOf(ms []*etcdserverpb.AlarmMember) []Alarm {
	out := make([]Alarm, 0, len(ms))
	for _, m := range ms {
		out = append(out, Alarm{MemberID: m.MemberID, Type: m.Alarm.String()})
	}
	sortAlarms(out)
	return out
}

// parseStatusAlarms reads the alarms out of a status response's errors,
// where etcd writes each one as the text form of its AlarmMember
// ("memberID:123 alarm:NOSPACE"); other errors ("etcdserver: no leader")
// are skipped.
func parseStatusAlarms(errs []string) []Alarm {
	var out []Alarm
	for _, e := range errs {
		var a Alarm
		var haveID bool
		for _, f := range strings.Fields(e) {
			k, v, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			switch k {
			case "memberID":
				id, err := strconv.ParseUint(v, 10, 64)
				haveID = err == nil
				a.MemberID = id
			case "alarm":
				a.Type = v
			}
		}
		if haveID && a.Type != "" && a.Type != etcdserverpb.AlarmType_NONE.String() {
			out = append(out, a)
		}
	}
	sortAlarms(out)
	return out
}

// mergeAlarms is the union of the members' alarm lists: a member that is
// behind may not know of an alarm yet.
func mergeAlarms(members []MemberHealth) []Alarm {
	var out []Alarm
	for _, m := range members {
		for _, a := range m.Alarms {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	sortAlarms(out)
	return out
}

func sortAlarms(as []Alarm) {
	slices.SortFunc(as, func(a, b Alarm) int {
		if c := strings.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		switch {
		case a.MemberID < b.MemberID:
			return -1
		case a.MemberID > b.MemberID:
			return 1
		}
		return 0
	})
}

// HasAlarm tells whether alarms holds one of the given type.
func HasAlarm(alarms []Alarm, typ string) bool {
	return slices.ContainsFunc(alarms, func(a Alarm) bool { return a.Type == typ })
}
