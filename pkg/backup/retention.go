package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PeriodicTimeLayout is the time part of a periodic backup's name, as the original
// operator wrote it, so existing buckets keep being pruned correctly.
const PeriodicTimeLayout = "2006-01-02-15:04:05"

// PeriodicKey names a periodic backup: "<base>_v<revision>_<UTC time>".
func PeriodicKey(base string, revision int64, at time.Time) string {
	return fmt.Sprintf("%s_v%d_%s", base, revision, at.UTC().Format(PeriodicTimeLayout))
}

// periodicPrefix is what every periodic backup of base starts with. It never matches
// base itself, so a one-shot backup written to exactly base is never pruned.
func periodicPrefix(base string) string { return base + "_v" }

// periodicBackup is a periodic backup's key with the order parsed out of it.
type periodicBackup struct {
	key      string
	revision int64
	at       time.Time
}

// parsePeriodicKey reads revision and time back out of a key written by PeriodicKey.
// Keys of any other shape are not ours to prune.
func parsePeriodicKey(base, key string) (periodicBackup, bool) {
	rest, ok := strings.CutPrefix(key, periodicPrefix(base))
	if !ok {
		return periodicBackup{}, false
	}
	revText, timeText, ok := strings.Cut(rest, "_")
	if !ok || revText == "" || strings.TrimLeft(revText, "0123456789") != "" {
		return periodicBackup{}, false
	}
	rev, err := strconv.ParseInt(revText, 10, 64)
	if err != nil {
		return periodicBackup{}, false
	}
	at, err := time.Parse(PeriodicTimeLayout, timeText)
	if err != nil {
		return periodicBackup{}, false
	}
	return periodicBackup{key: key, revision: rev, at: at}, true
}

// Tiers are how many of the latest hours, days, weeks (ISO, Monday to Sunday)
// and months that hold a backup keep their newest one. Counting periods that
// hold a backup, rather than the periods before now, means a pause in the
// backups (etcd down for a week) never deletes what was taken before it.
type Tiers struct {
	Hourly, Daily, Weekly, Monthly int
}

// Retention says which periodic backups of one base stay.
type Retention struct {
	// MaxBackups > 0 keeps the newest MaxBackups by (revision, time); 0 keeps
	// all, unless Tiers is set.
	MaxBackups int
	// Tiers, if set, keep the newest backup of each period they count, and
	// the newest backup of all. With MaxBackups too, a backup either keeps
	// stays: deleting needs both rules to agree.
	Tiers *Tiers
	// Location is the zone periods are read in; nil is UTC.
	Location *time.Location
}

// Expired returns the periodic backups of base among keys that r does not keep,
// newest first. Keys that are not periodic backups of base, including base
// itself, are never returned. It reads nothing but the names, so the same
// names give the same answer on every run and after every restart.
func (r Retention) Expired(base string, keys []string) []string {
	if r.MaxBackups <= 0 && r.Tiers == nil {
		return nil
	}
	var found []periodicBackup
	for _, k := range keys {
		if b, ok := parsePeriodicKey(base, k); ok {
			found = append(found, b)
		}
	}
	kept := map[string]bool{}
	byRevision(found)
	if r.MaxBackups > 0 {
		for _, b := range found[:min(r.MaxBackups, len(found))] {
			kept[b.key] = true
		}
	}
	if r.Tiers != nil {
		loc := r.Location
		if loc == nil {
			loc = time.UTC
		}
		for _, k := range r.Tiers.keep(found, loc) {
			kept[k] = true
		}
	}
	var out []string
	for _, b := range found {
		if !kept[b.key] {
			out = append(out, b.key)
		}
	}
	return out
}

// byRevision sorts newest first by (revision, time, key), parsed from the
// names: the original sorted the names as strings, so "_v9_" outlived
// "_v10_" and the newest backups were deleted once the revision gained a
// digit.
func byRevision(bs []periodicBackup) {
	sort.Slice(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if a.revision != b.revision {
			return a.revision > b.revision
		}
		if !a.at.Equal(b.at) {
			return a.at.After(b.at)
		}
		return a.key > b.key
	})
}

// keep returns the keys the tiers keep: the newest backup by time, and the
// newest of each of the latest periods of each tier. Periods are read by the
// time in the name, not the revision: they are calendar periods.
func (t *Tiers) keep(bs []periodicBackup, loc *time.Location) []string {
	byTime := slices.Clone(bs)
	sort.SliceStable(byTime, func(i, j int) bool { return byTime[i].at.After(byTime[j].at) })
	if len(byTime) == 0 {
		return nil
	}
	keys := []string{byTime[0].key}
	for _, tier := range []struct {
		n      int
		period func(time.Time) string
	}{
		// The hour carries its offset: the hour a daylight-saving change
		// repeats is two hours, as it is on the clock.
		{t.Hourly, func(at time.Time) string { return at.Format("2006-01-02T15 -0700") }},
		{t.Daily, func(at time.Time) string { return at.Format("2006-01-02") }},
		{t.Weekly, func(at time.Time) string { y, w := at.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{t.Monthly, func(at time.Time) string { return at.Format("2006-01") }},
	} {
		last, taken := "", 0
		for _, b := range byTime {
			if taken >= tier.n {
				break
			}
			// Newest first, so the first backup of a period is its newest.
			if p := tier.period(b.at.In(loc)); p != last {
				keys = append(keys, b.key)
				last, taken = p, taken+1
			}
		}
	}
	return keys
}

// Prune deletes the periodic backups of base that r does not keep. It tries
// every deletion and reports all that failed, so one stuck object does not keep
// the others. It lists only keys under base's periodic prefix, and deletes only
// names of the shape PeriodicKey writes: nothing else in the bucket is touched.
func Prune(ctx context.Context, store Store, base string, r Retention) (deleted []string, err error) {
	if r.MaxBackups <= 0 && r.Tiers == nil {
		return nil, nil
	}
	objs, err := store.List(ctx, periodicPrefix(base))
	if err != nil {
		return nil, fmt.Errorf("list backups under %q: %w", periodicPrefix(base), err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	var errs []error
	for _, k := range r.Expired(base, keys) {
		if err := store.Delete(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("delete %q: %w", k, err))
			continue
		}
		deleted = append(deleted, k)
	}
	return deleted, errors.Join(errs...)
}
