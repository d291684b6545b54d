package backup

import (
	"context"
	"errors"
	"fmt"
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

// Expired returns the periodic backups of base among keys that are beyond the newest
// keep, newest first. Age is (revision, time), parsed from the names: the original
// sorted the names as strings, so "_v9_" outlived "_v10_" and the newest backups
// were deleted once the revision gained a digit. Keys that are not periodic backups
// of base, including base itself, are never returned. keep <= 0 keeps everything.
func Expired(base string, keys []string, keep int) []string {
	if keep <= 0 {
		return nil
	}
	var found []periodicBackup
	for _, k := range keys {
		if b, ok := parsePeriodicKey(base, k); ok {
			found = append(found, b)
		}
	}
	if len(found) <= keep {
		return nil
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.revision != b.revision {
			return a.revision > b.revision
		}
		if !a.at.Equal(b.at) {
			return a.at.After(b.at)
		}
		return a.key > b.key
	})
	var out []string
	for _, b := range found[keep:] {
		out = append(out, b.key)
	}
	return out
}

// Prune deletes the periodic backups of base beyond the newest keep. It tries every
// deletion and reports all that failed, so one stuck object does not keep the others.
func Prune(ctx context.Context, store Store, base string, keep int) (deleted []string, err error) {
	if keep <= 0 {
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
	for _, k := range Expired(base, keys, keep) {
		if err := store.Delete(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("delete %q: %w", k, err))
			continue
		}
		deleted = append(deleted, k)
	}
	return deleted, errors.Join(errs...)
}
