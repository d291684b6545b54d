// Package benchreport holds the JSON reports the benches write
// (hack/bench/backup, hack/bench/restore and test/e2e's bench tests) and
// hack/gen-docs reads into docs/results. Both sides use these types, so that
// a field renamed on one side is renamed on the other.
package benchreport

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Header begins the report of each of test/e2e's bench tests,
// _output/bench/<kind>-<time>.json: which bench it is, when and where it ran.
type Header struct {
	Kind    string `json:"kind"` // speed, scale, etcd
	Date    string `json:"date"`
	Machine string `json:"machine"`
}

// Backups is hack/bench/backup's report of one database size.
type Backups struct {
	SizeMiB        int     `json:"sizeMiB"`
	DatabaseMiB    float64 `json:"databaseMiB,omitempty"`
	Runs           int     `json:"runs"`
	EtcdVersion    string  `json:"etcdVersion,omitempty"`
	EtcdctlVersion string  `json:"etcdctlVersion,omitempty"`
	// EtcdctlMiBPerSecond is `etcdctl snapshot save` to local disk, the floor; 0: not run.
	EtcdctlMiBPerSecond float64     `json:"etcdctlMiBPerSecond,omitempty"`
	Rows                []BackupRow `json:"rows"`
}

// BackupRow is one way of storing (codec) into one store.
type BackupRow struct {
	Store string `json:"store"` // s3, abs, gcs
	Codec string `json:"codec"` // none, gzip, zstd, aes, gzip+aes, zstd+aes
	// MiBPerSecond is the best rate over the runs, of the snapshot etcd sent.
	MiBPerSecond float64 `json:"miBPerSecond"`
	// OfEtcdctlPercent is MiBPerSecond as a share of the floor's, from the
	// unrounded rates; 0: no floor.
	OfEtcdctlPercent float64 `json:"ofEtcdctlPercent,omitempty"`
	StoredMiB        float64 `json:"storedMiB,omitempty"`
	PeakRSSMiB       float64 `json:"peakRSSMiB"`
	PeakHeapMiB      float64 `json:"peakHeapMiB"`
}

// RestoreDataPath is hack/bench/restore's report: the time of each step of a
// restore's data path.
type RestoreDataPath struct {
	SizeMiB     int     `json:"sizeMiB"`
	ValueKiB    int     `json:"valueKiB"`
	Keys        int     `json:"keys"`
	SnapshotMiB float64 `json:"snapshotMiB"`
	EtcdVersion string  `json:"etcdVersion"`
	// HourWritesPerSecond is the rate of the archived hour replayed after
	// the snapshot, as a restore to a point does; 0 when none was.
	HourWritesPerSecond int           `json:"hourWritesPerSecond,omitempty"`
	Steps               []RestoreStep `json:"steps"`
}

// RestoreStep is one step of the restore data path.
type RestoreStep struct {
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
	// MiBPerSecond is the snapshot's size over the step's time; 0 for a step
	// whose time is not the snapshot's to read.
	MiBPerSecond float64 `json:"miBPerSecond,omitempty"`
}

// RestoreOnCluster is TestMeasureRestore's report: when each stage of a
// whole restore was first seen.
type RestoreOnCluster struct {
	SizeMiB          int     `json:"sizeMiB"`
	SnapshotMiB      float64 `json:"snapshotMiB"`
	Members          int     `json:"members"`
	EtcdVersion      string  `json:"etcdVersion"`
	CompletedSeconds float64 `json:"completedSeconds"`
	// PeakWorkingSetMiB is the restore operator's, as the kubelet samples it.
	PeakWorkingSetMiB float64         `json:"peakWorkingSetMiB"`
	Stages            []Stage         `json:"stages"`
	InitContainers    []InitContainer `json:"initContainers,omitempty"`
}

// Stage is when a stage of the restore was first seen, in seconds after the
// EtcdRestore was created.
type Stage struct {
	Seconds float64 `json:"seconds"`
	Stage   string  `json:"stage"`
}

// InitContainer is how long one of the seed's init containers ran.
type InitContainer struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Write writes a report as indented JSON to path, making its directory.
func Write(path string, report any) error {
	raw, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

// ToolVersion is the version a tool of etcd says it is: what follows prefix
// on the line of `tool args...`'s output that starts with it (for `etcd
// --version`, prefix "etcd Version: " in "etcd Version: 3.5.21").
func ToolVersion(tool string, args []string, prefix string) (string, error) {
	command := strings.Join(append([]string{filepath.Base(tool)}, args...), " ")
	out, err := exec.Command(tool, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", command, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s said %q", command, out)
}
