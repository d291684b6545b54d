package operatorrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// A replica chooses its lock once, at start, from what its role grants, so
// replicas under different roles, or an original etcd-operator (which leads on
// the Endpoints record only) beside ours, would hold different objects and
// lead at once. Two locks keep them apart: bothLocks, when the role grants
// both kinds, and yieldingLock, when it grants one and lets the other be read.

// bothLocks holds the Endpoints record and the Lease as one lock, for a role
// that grants both: a replica or an original holding the Endpoints record
// alone, and a replica holding the Lease alone, each find one of the two
// taken, and take neither while this one holds them.
//
// It is client-go's resourcelock.MultiLock (Endpoints primary, Lease
// secondary) but for two cases. MultiLock's Create ignores an Endpoints object
// that someone made between its Get and its Create, then creates the Lease and
// leads beside whoever made it; here that is a lost round. And a missing
// Endpoints object beside an existing Lease is read as the Lease's record,
// where MultiLock creates the Endpoints record and fails on the Lease.
type bothLocks struct {
	endpoints *EndpointsLock
	lease     *resourcelock.LeaseLock

	// What the last Get found missing, for Update to create.
	noEndpoints, noLease bool
}

var _ resourcelock.Interface = (*bothLocks)(nil)

// Get reads both records. They name the same holder while one replica holds
// them; when they differ the holder is resourcelock.UnknownLeader, as
// MultiLock has it, and the elector waits until neither has changed for a
// lease duration. When one object is missing the other's record is the lock's.
func (b *bothLocks) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	eRec, eRaw, eErr := b.endpoints.Get(ctx)
	if eErr != nil && !apierrors.IsNotFound(eErr) {
		return nil, nil, eErr
	}
	lRec, lRaw, lErr := b.lease.Get(ctx)
	if lErr != nil && !apierrors.IsNotFound(lErr) {
		return nil, nil, lErr
	}
	b.noEndpoints, b.noLease = eErr != nil, lErr != nil
	switch {
	case b.noEndpoints && b.noLease:
		return nil, nil, lErr
	case b.noEndpoints:
		return lRec, lRaw, nil
	case b.noLease:
		return eRec, eRaw, nil
	}
	if eRec.HolderIdentity != lRec.HolderIdentity {
		eRec.HolderIdentity = resourcelock.UnknownLeader
		var err error
		if eRaw, err = json.Marshal(eRec); err != nil {
			return nil, nil, err
		}
	}
	return eRec, resourcelock.ConcatRawRecord(eRaw, lRaw), nil
}

// Create makes both objects; either existing already is an error.
func (b *bothLocks) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := b.endpoints.Create(ctx, rec); err != nil {
		return err
	}
	b.noEndpoints = false
	if err := b.lease.Create(ctx, rec); err != nil {
		return err
	}
	b.noLease = false
	return nil
}

// Update writes the record to both, Endpoints first, creating the one the last
// Get found missing.
func (b *bothLocks) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	write := func(missing *bool, l resourcelock.Interface) error {
		if *missing {
			if err := l.Create(ctx, rec); err != nil {
				return err
			}
			*missing = false
			return nil
		}
		return l.Update(ctx, rec)
	}
	if err := write(&b.noEndpoints, b.endpoints); err != nil {
		return err
	}
	return write(&b.noLease, b.lease)
}

// RecordEvent records the elector's events on both objects.
func (b *bothLocks) RecordEvent(s string) {
	b.endpoints.RecordEvent(s)
	b.lease.RecordEvent(s)
}

// Describe is namespace/name, the same for both objects.
func (b *bothLocks) Describe() string { return b.endpoints.Describe() }

// Identity is the contender's identity.
func (b *bothLocks) Identity() string { return b.endpoints.Identity() }

// ErrOtherLockHeld is what a replica allowed one kind of lock gets, wrapped,
// for a write naming itself while a live record of the other kind names
// another holder.
var ErrOtherLockHeld = errors.New("the leader-election record of the other kind is held")

// yieldingLock is the lock of a role that grants one kind and lets the other
// be read: before every write naming this replica (acquiring or renewing; a
// release always goes ahead) it reads the other kind's record, and refuses
// while that record is live and names another holder. A leader refused its
// renewal stops leading: its Fence closes at once and the elector gives up
// after the renew deadline.
//
// It keeps a replica from leading beside one that holds the other kind, but
// cannot keep that one out: an original started while this replica leads
// takes the Endpoints record, and this replica stops at its next renewal.
// Holding both (bothLocks) keeps either out.
type yieldingLock struct {
	resourcelock.Interface
	kind, otherKind LockKind
	// other is read only.
	other resourcelock.Interface
	now   func() time.Time
	log   *logrus.Entry

	mu sync.Mutex
	// seen is the other record as last read, changed when this process saw
	// it change (zero until it has).
	seen    []byte
	read    bool
	changed time.Time
	// refused is the holder last refused for, so that each is logged once.
	refused string
}

func (l *yieldingLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := l.yield(ctx, rec); err != nil {
		return err
	}
	return l.Interface.Create(ctx, rec)
}

func (l *yieldingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := l.yield(ctx, rec); err != nil {
		return err
	}
	return l.Interface.Update(ctx, rec)
}

// yield returns an error wrapping ErrOtherLockHeld while the other record is
// live and names another holder. Live is judged by the record's renewTime
// plus its lease duration, and also by when this process saw the record
// change, as client-go's elector judges its own lock: a clock ahead of the
// holder's then does not make a record that is still being renewed look
// expired. A record that cannot be read is an error too: the write waits
// until it can be.
func (l *yieldingLock) yield(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity != l.Identity() {
		return nil
	}
	other, raw, err := l.other.Get(ctx)
	if apierrors.IsNotFound(err) {
		other, raw, err = &resourcelock.LeaderElectionRecord{}, nil, nil
	}
	if err != nil {
		return fmt.Errorf("read the %s record %s before writing the %s: %w", l.otherKind, l.other.Describe(), l.kind, err)
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.read && !bytes.Equal(raw, l.seen) {
		l.changed = now
	}
	l.seen, l.read = raw, true

	lease := time.Duration(other.LeaseDurationSeconds) * time.Second
	holder := other.HolderIdentity
	live := holder != "" && holder != l.Identity() &&
		(now.Before(other.RenewTime.Add(lease)) || !l.changed.IsZero() && now.Before(l.changed.Add(lease)))
	if !live {
		if l.refused != "" {
			l.log.WithFields(logrus.Fields{"lock": l.kind, "otherLock": l.otherKind, "holder": l.refused}).
				Infof("the %s record %s no longer names a live holder: this replica may lead", l.otherKind, l.other.Describe())
			l.refused = ""
		}
		return nil
	}
	if l.refused != holder {
		l.refused = holder
		l.log.WithFields(logrus.Fields{
			"lock": l.kind, "otherLock": l.otherKind, "holder": holder,
			"renewTime": other.RenewTime.UTC().Format(time.RFC3339), "leaseDurationSeconds": other.LeaseDurationSeconds,
		}).Warnf("not leading: the %s record %s names %s, who leads on it (an original etcd-operator, or a replica whose role allows the %s only); waiting as a standby until it stops renewing",
			l.otherKind, l.other.Describe(), holder, l.otherKind)
	}
	return fmt.Errorf("%w: %s %s names %s, renewed %s", ErrOtherLockHeld, l.otherKind, l.other.Describe(), holder, other.RenewTime.UTC().Format(time.RFC3339))
}
