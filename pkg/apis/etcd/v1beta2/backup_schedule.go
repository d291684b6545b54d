package v1beta2

import (
	"errors"
	"fmt"
	"strings"
	"time"

	// The operator image has no zoneinfo files; the Go copy makes every binary
	// read spec.backupPolicy.timeZone the same way, whatever its host has.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

const (
	// MaxBackupScheduleLength bounds spec.backupPolicy.schedule (and its CEL rule).
	MaxBackupScheduleLength = 128
	// MaxTimeZoneLength bounds spec.backupPolicy.timeZone; IANA names are far shorter.
	MaxTimeZoneLength = 64
	// BackupScheduleMessage is what a schedule must look like, in the Go
	// validation and the CRD's rule alike.
	BackupScheduleMessage = `must be a cron schedule of five fields like "0 */6 * * *", or @hourly, @daily, @weekly, @monthly or @yearly`
	// BackupScheduleOrIntervalMessage refuses a policy with both ways of repeating.
	BackupScheduleOrIntervalMessage = "set either schedule or backupIntervalInSecond, not both"
)

// BackupSchedule is spec.backupPolicy.schedule read in its time zone.
//
// +k8s:deepcopy-gen=false
type BackupSchedule struct {
	spec cron.Schedule
	loc  *time.Location
}

// ParseBackupSchedule reads a schedule and the IANA time zone it is written in
// ("" is UTC).
func ParseBackupSchedule(schedule, timeZone string) (*BackupSchedule, error) {
	loc, err := LoadTimeZone(timeZone)
	if err != nil {
		return nil, err
	}
	spec, err := parseCron(schedule)
	if err != nil {
		return nil, err
	}
	return &BackupSchedule{spec: spec, loc: loc}, nil
}

func parseCron(schedule string) (cron.Schedule, error) {
	s := strings.TrimSpace(schedule)
	switch {
	case s == "":
		return nil, errors.New("is empty")
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return nil, errors.New("names its time zone in timeZone, not in the schedule")
	case strings.HasPrefix(s, "@every"):
		return nil, errors.New("repeats by a fixed interval: that is backupIntervalInSecond")
	}
	// The standard five fields and the @ shorthands, as the defragmentation
	// schedule reads them; the parser's own "@every" and "TZ=" forms are
	// refused above: backupIntervalInSecond and timeZone are the fields for
	// those.
	spec, err := cron.ParseStandard(s)
	if err != nil {
		return nil, err
	}
	// From a fixed time, so that validation gives the same answer every day;
	// the library looks five years ahead, which finds every February 29th.
	if spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, errors.New("names a day that never comes, like February 30th")
	}
	return spec, nil
}

// LoadTimeZone finds an IANA time zone; "" and "UTC" are UTC. "Local" is refused:
// it would be whatever zone the operator's host has.
func LoadTimeZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" depends on the operator's host; name the zone, like "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("is not an IANA time zone name like \"Europe/Berlin\" or \"UTC\"")
	}
	return loc, nil
}

// Next is the first time of the schedule after t. Wall-clock times are read as
// the cron library reads them, as Kubernetes CronJobs do: a time that a
// daylight-saving change skips (02:30 in Berlin on the spring Sunday) does not
// happen that day, and one that occurs twice (02:30 on the autumn Sunday)
// happens twice. Schedules that avoid 02:00-03:00 never notice.
func (s *BackupSchedule) Next(t time.Time) time.Time {
	return s.spec.Next(t.In(s.loc))
}

// Location is the schedule's time zone.
func (s *BackupSchedule) Location() *time.Location { return s.loc }
