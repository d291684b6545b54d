package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProvenanceSaysWhatWasNotRecorded(t *testing.T) {
	for _, c := range []struct {
		name string
		run  runInfo
		want string
	}{
		{"date and commit", runInfo{Date: "2026-11-26", Commit: "abc1234", Machine: "2 cores", Run: "seconds"},
			"Last run: 2026-11-26, commit abc1234, 2 cores; seconds.\n"},
		{"no commit", runInfo{Date: "2026-11-25", Machine: "a 2-core VM"},
			"Last run: 2026-11-25, commit not recorded, a 2-core VM.\n"},
		{"neither", runInfo{Machine: "a 2-core VM", Run: "`run.sh`"},
			"Last run: date and commit not recorded, a 2-core VM; `run.sh`.\n"},
		{"no date", runInfo{Commit: "abc1234", Machine: "a 2-core VM"},
			"Last run: date not recorded, commit abc1234, a 2-core VM.\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.run.provenance(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestBenchSectionKeepsTheTableUnderOneProvenanceLine(t *testing.T) {
	md := "Speed, 2026-11-26, single node, 2 cores; seconds, median of 3 (min–max)\n\n| scenario | seconds |\n|---|---|\n| floor | 4.6 |\n\nA note.\n"
	d := benchSection(md, benchreport.Header{Kind: "speed", Date: "2026-11-26", Machine: "single node, 2 cores"}, "abc1234", []byte(`{"kind":"speed"}`))
	raw := marshalData(t, d)
	got, err := benchBody(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := "Last run: 2026-11-26, commit abc1234, single node, 2 cores; seconds, median of 3 (min–max).\n\n| scenario | seconds |\n|---|---|\n| floor | 4.6 |\n\nA note.\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func marshalData(t *testing.T, v any) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.json")
	if err := writeData(path, v); err != nil {
		t.Fatal(err)
	}
	return []byte(readFile(t, path))
}

func TestBenchPageTakesTheNewestReportOfEachKind(t *testing.T) {
	dir := t.TempDir()
	m := "single node, 2 cores"
	writeFile(t, filepath.Join(dir, "speed-20261125-010000.json"), `{"kind":"speed","date":"2026-11-25","machine":"`+m+`"}`)
	writeFile(t, filepath.Join(dir, "speed-20261125-010000.md"), "Speed, 2026-11-25, "+m+"; seconds\n\n| old |\n")
	writeFile(t, filepath.Join(dir, "speed-20261126-010000.json"), `{"kind":"speed","date":"2026-11-26","machine":"`+m+`"}`)
	writeFile(t, filepath.Join(dir, "speed-20261126-010000.md"), "Speed, 2026-11-26, "+m+"; seconds\n\n| new |\n")
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "bench.md")
	if err := runBench([]string{"-in", dir, "-data", data, "-o", out, "-commit", "abc1234"}); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, out)
	if !strings.Contains(page, "Last run: 2026-11-26, commit abc1234, single node, 2 cores; seconds.\n\n| new |") || strings.Contains(page, "| old |") {
		t.Errorf("bench.md:\n%s", page)
	}
	if d := readFile(t, dataPath(data, "bench", "speed")); !strings.Contains(d, `"date": "2026-11-26"`) {
		t.Errorf("the run's data was not written:\n%s", d)
	}
}

func TestABenchRunKeepsTheSectionsItDidNotMeasure(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "bench.md")
	scale := benchData{runInfo: runInfo{Date: "2026-11-20", Commit: "0ld5ca1", Machine: "2 cores"}, Table: "| old scale |\n"}
	if err := writeData(dataPath(data, "bench", "scale"), scale); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "speed-20261126-010000.json"), `{"kind":"speed","date":"2026-11-26","machine":"2 cores"}`)
	writeFile(t, filepath.Join(dir, "speed-20261126-010000.md"), "Speed, 2026-11-26, 2 cores\n\n| new speed |\n")
	if err := runBench([]string{"-in", dir, "-data", data, "-o", out, "-commit", "abc1234"}); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, out)
	speed, scaleAt := strings.Index(page, "## Speed\n\nLast run: 2026-11-26, commit abc1234"), strings.Index(page, "## Scale\n\nLast run: 2026-11-20, commit 0ld5ca1")
	if speed < 0 || scaleAt < speed || !strings.Contains(page, "| old scale |") {
		t.Errorf("bench.md:\n%s", page)
	}
}

func TestTheEtcdBenchmarkPartIsASectionOfItsOwnBelowTheOthers(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "bench.md")
	for _, kind := range []string{"speed", "scale"} {
		old := benchData{runInfo: runInfo{Date: "2026-11-20", Commit: "0ld5ca1", Machine: "2 cores"}, Table: "| old " + kind + " |\n"}
		if err := writeData(dataPath(data, "bench", kind), old); err != nil {
			t.Fatal(err)
		}
	}
	m := "single node, 2 cores"
	writeFile(t, filepath.Join(dir, "etcd-20261129-120000.json"), `{"kind":"etcd","date":"2026-11-29","machine":"`+m+`","etcd":{"etcdVersion":"3.5.21"}}`)
	writeFile(t, filepath.Join(dir, "etcd-20261129-120000.md"),
		"etcd's benchmark tool, 2026-11-29, "+m+"; etcd 3.5.21, median of 3 run(s)\n\n| workload | requests/s, operator / floor |\n|---|---|\n| put, 1 client | 600 / 610 |\n")
	if err := runBench([]string{"-in", dir, "-data", data, "-o", out, "-commit", "abc1234"}); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, out)
	speed, scale := strings.Index(page, "## Speed\n\nLast run: 2026-11-20"), strings.Index(page, "## Scale\n\nLast run: 2026-11-20")
	etcd := strings.Index(page, "## etcd's benchmark tool: the operator's cluster against the floor\n\n"+
		"Last run: 2026-11-29, commit abc1234, single node, 2 cores; etcd 3.5.21, median of 3 run(s).\n\n| workload |")
	if speed < 0 || scale < speed || etcd < scale || !strings.Contains(page, "| put, 1 client | 600 / 610 |") {
		t.Errorf("bench.md:\n%s", page)
	}
	if d := readFile(t, dataPath(data, "bench", "etcd")); !strings.Contains(d, `"etcdVersion": "3.5.21"`) {
		t.Errorf("the etcd part's data does not keep its report:\n%s", d)
	}
}

func TestChaosPageFromResults(t *testing.T) {
	dir := t.TempDir()
	in, data, out := filepath.Join(dir, "results.json"), filepath.Join(dir, "data"), filepath.Join(dir, "chaos.md")
	writeFile(t, in, `[{"scenario":"leader-kill","ops":10,"acked":9,"failed":0,"indeterminate":1,"linearizable":"yes","ackedLost":0,"longestUnavailableSeconds":1.2,"recoverySeconds":16.9,"passed":true,"test":"TestChaosLeaderKill"}]`)
	if err := runChaos([]string{"-in", in, "-data", data, "-o", out, "-commit", "abc1234", "-date", "2026-11-25", "-machine", "single node, 2 cores", "-run", "1 scenarios in 60 s, 6 at a time"}); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, out)
	for _, want := range []string{
		"## The matrix\n\nLast run: 2026-11-25, commit abc1234, single node, 2 cores; 1 scenarios in 60 s, 6 at a time.\n",
		"| leader-kill | 10 | 9 | 0 | 1 | yes | 0 | 0 | 1.2 s | 16.9 s | yes |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("chaos.md lacks %q:\n%s", want, page)
		}
	}
	if problems := checkResults(data, dir); len(problems) != 2 { // bench.md and backup-restore.md are absent here
		t.Errorf("problems: %v", problems)
	}
}

// make chaos runs the matrix, the tenant control plane's scenarios, or both
// (CHAOS_ONLY): each part it ran replaces its section, a part it left out
// keeps its last run, and a part whose results hold no line changes nothing.
func TestChaosPageKeepsThePartsARunLeftOut(t *testing.T) {
	const (
		matrix = `[{"scenario":"leader-kill","ops":10,"acked":9,"failed":0,"indeterminate":1,"linearizable":"yes","ackedLost":0,"longestUnavailableSeconds":1.2,"recoverySeconds":16.9,"passed":true,"test":"TestChaosLeaderKill"}]`
		// As judgeTenantLoad writes it, with the fields the page leaves out.
		tenant     = `[{"scenario":"member-and-leader-kill","ops":900,"acked":880,"missing":0,"outOfOrder":0,"longestUnavailableSeconds":3.1,"readyzFailures":2,"longestNotReadySeconds":4.2,"longestSilentWatchSeconds":2.5,"watchErrors":1,"errors":[{"message":"etcdserver: leader changed","count":3}],"test":"TestTenantControlPlaneThroughMemberAndLeaderKill","passed":true}]`
		lastMatrix = "| old-matrix-row |"
		lastTenant = "| old-tenant-row |"
		matrixRow  = "| leader-kill | 10 | 9 | 0 | 1 | yes | 0 | 0 | 1.2 s | 16.9 s | yes |"
		tenantLine = "| member-and-leader-kill | 900 | 880 | 0 | 0 | 3.1 s | 2 | 4.2 s | 2.5 s | yes |"
	)
	for _, tc := range []struct {
		name           string
		matrix, tenant string // the run's results; "" for a part it left out
		want, lacks    []string
		refused        string
	}{
		{name: "a run of both parts replaces both sections", matrix: matrix, tenant: tenant,
			want:  []string{"## The matrix\n\nLast run: 2026-11-29, commit abc1234, single node, 2 cores; 1 scenarios in 60 s, 6 at a time.\n", matrixRow, "## A Kubernetes control plane as the client\n\nLast run: 2026-11-29, commit abc1234, single node, 2 cores; 1 scenarios alongside the matrix's, in 60 s, 6 at a time.\n", tenantLine},
			lacks: []string{lastMatrix, lastTenant}},
		{name: "a tenant-only run keeps the matrix's last run", tenant: tenant,
			want: []string{lastMatrix, tenantLine}, lacks: []string{lastTenant}},
		{name: "a matrix-only run keeps the tenant scenarios' last run", matrix: matrix,
			want: []string{matrixRow, lastTenant}, lacks: []string{lastMatrix}},
		{name: "tenant results without a line change nothing", matrix: matrix, tenant: "[]",
			refused: "no scenario in", want: []string{lastMatrix, lastTenant}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data, out := filepath.Join(dir, "data"), filepath.Join(dir, "chaos.md")
			if err := writeData(dataPath(data, "chaos", "matrix"), chaosData{runInfo: runInfo{Date: "2026-11-01", Machine: "2 cores"},
				Scenarios: []chaosRow{{Scenario: "old-matrix-row"}}}); err != nil {
				t.Fatal(err)
			}
			if err := writeData(dataPath(data, "chaos", "tenant"), tenantData{runInfo: runInfo{Date: "2026-11-01", Machine: "2 cores"},
				Scenarios: []tenantRow{{Scenario: "old-tenant-row"}}}); err != nil {
				t.Fatal(err)
			}
			if err := writePage("chaos", data, out); err != nil {
				t.Fatal(err)
			}
			args := []string{"-data", data, "-o", out, "-commit", "abc1234", "-date", "2026-11-29", "-machine", "single node, 2 cores",
				"-run", "1 scenarios in 60 s, 6 at a time", "-tenant-run", "1 scenarios alongside the matrix's, in 60 s, 6 at a time", "-in", ""}
			if tc.matrix != "" {
				args[len(args)-1] = filepath.Join(dir, "results.json")
				writeFile(t, args[len(args)-1], tc.matrix)
			}
			if tc.tenant != "" {
				args = append(args, "-tenant", filepath.Join(dir, "tenant.json"))
				writeFile(t, filepath.Join(dir, "tenant.json"), tc.tenant)
			}
			err := runChaos(args)
			if tc.refused == "" && err != nil {
				t.Fatal(err)
			}
			if tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)) {
				t.Errorf("runChaos returned %v, want an error saying %q", err, tc.refused)
			}
			page := readFile(t, out)
			for _, want := range tc.want {
				if !strings.Contains(page, want) {
					t.Errorf("chaos.md lacks %q:\n%s", want, page)
				}
			}
			for _, lack := range tc.lacks {
				if strings.Contains(page, lack) {
					t.Errorf("chaos.md still has %q:\n%s", lack, page)
				}
			}
			if problems := checkResults(data, dir); len(problems) != 2 { // bench.md and backup-restore.md are absent here
				t.Errorf("problems: %v", problems)
			}
		})
	}
}

// A focused run (some scenarios, -merge) replaces those rows alone; the
// line above the table keeps the whole run's provenance and names the rows
// the focused run brought.
func TestAFocusedChaosRunReplacesItsRowsAlone(t *testing.T) {
	dir := t.TempDir()
	in, data, out := filepath.Join(dir, "results.json"), filepath.Join(dir, "data"), filepath.Join(dir, "chaos.md")
	if err := writeData(dataPath(data, "chaos", "matrix"), chaosData{runInfo: runInfo{Date: "2026-11-01", Commit: "0ld0ld0", Machine: "2 cores", Run: "26 scenarios in 1075 s"},
		Scenarios: []chaosRow{{Scenario: "leader-kill", Ops: 1}, {Scenario: "node-lost", Ops: 2}}}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, in, `[{"scenario":"node-lost","ops":20,"acked":20,"failed":0,"indeterminate":0,"linearizable":"yes","ackedLost":0,"longestUnavailableSeconds":1.0,"recoverySeconds":60.0,"passed":true},
		{"scenario":"node-cut-off","ops":30,"acked":30,"failed":0,"indeterminate":0,"linearizable":"yes","ackedLost":0,"longestUnavailableSeconds":2.0,"recoverySeconds":90.0,"passed":true}]`)
	if err := runChaos([]string{"-merge", "-in", in, "-data", data, "-o", out, "-commit", "abc1234", "-date", "2026-11-29", "-machine", "three nodes", "-run", "2 scenarios in 600 s"}); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, out)
	for _, want := range []string{
		"Last run: 2026-11-01, commit 0ld0ld0, 2 cores; 26 scenarios in 1075 s; the node-cut-off, node-lost rows from a run on 2026-11-29 at commit abc1234, three nodes (2 scenarios in 600 s).\n",
		"| leader-kill | 1 |",
		"| node-lost | 20 | 20 |",
		"| node-cut-off | 30 | 30 |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("chaos.md lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "| node-lost | 2 |") {
		t.Errorf("the focused run's scenario keeps its old row:\n%s", page)
	}
}

func TestBackupsTablePutsTheSizesSideBySide(t *testing.T) {
	got := backupsTable([]benchreport.Backups{
		{SizeMiB: 256, EtcdctlMiBPerSecond: 198, Rows: []benchreport.BackupRow{
			{Store: "s3", Codec: "none", MiBPerSecond: 175.4, OfEtcdctlPercent: 88.4, StoredMiB: 262, PeakRSSMiB: 110, PeakHeapMiB: 65},
			{Store: "gcs", Codec: "zstd+aes", MiBPerSecond: 82, OfEtcdctlPercent: 41.6, StoredMiB: 128, PeakRSSMiB: 160, PeakHeapMiB: 90},
		}},
		{SizeMiB: 1024, Rows: []benchreport.BackupRow{
			{Store: "s3", Codec: "none", MiBPerSecond: 281, StoredMiB: 1050.2, PeakRSSMiB: 111, PeakHeapMiB: 65},
		}},
	})
	want := "| store | stored as | MiB/s at 256 MiB | of etcdctl | MiB/s at 1 GiB | of etcdctl | stored (1 GiB) | peak RSS at 256 MiB / 1 GiB | peak Go heap at 256 MiB / 1 GiB |\n" +
		"|---|---|---|---|---|---|---|---|---|\n" +
		"| local disk | `etcdctl snapshot save` | 198 | 100 % | – | – | | | |\n" +
		"| S3 | plain | 175 | 88 % | 281 | – | 1050 MiB | 110 / 111 MiB | 65 / 65 MiB |\n" +
		"| GCS | zstd + AES | 82 | 42 % | – | – | | 160 / – MiB | 90 / – MiB |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestBackupRestorePageFromTheBenchesReports(t *testing.T) {
	dir := t.TempDir()
	in, data, out := filepath.Join(dir, "in"), filepath.Join(dir, "data"), filepath.Join(dir, "backup-restore.md")
	row := `{"store":"s3","codec":"gzip","miBPerSecond":130.4,"ofEtcdctlPercent":65.7,"storedMiB":131.2,"peakRSSMiB":110,"peakHeapMiB":62}`
	writeFile(t, filepath.Join(in, "backups-256-20261129-010000.json"),
		`{"sizeMiB":256,"runs":2,"etcdVersion":"3.5.21","etcdctlVersion":"3.6.6","etcdctlMiBPerSecond":198.6,"rows":[`+row+`]}`)
	writeFile(t, filepath.Join(in, "backups-1024-20261129-010500.json"),
		`{"sizeMiB":1024,"runs":1,"etcdVersion":"3.5.21","etcdctlVersion":"3.6.6","etcdctlMiBPerSecond":344,"rows":[`+strings.Replace(row, "131.2", "524.4", 1)+`]}`)
	writeFile(t, filepath.Join(in, "restore-data-path-20261129-020000.json"),
		`{"sizeMiB":512,"valueKiB":256,"keys":2048,"snapshotMiB":520.3,"etcdVersion":"3.5.21","hourWritesPerSecond":10,"steps":[`+
			`{"step":"the operator reads the backup through and checks it","seconds":0.91,"miBPerSecond":580.2},`+
			`{"step":"etcd starts on the restored data and serves all keys","seconds":1.04},`+
			`{"step":"the archive's hour of changes (10 writes/s, 36000 revisions) read from the store and replayed","seconds":13.5},`+
			`{"step":"the whole data path","seconds":15.45}]}`)
	// The section no report of this run measured keeps its data.
	kept := goBenchmarksData{runInfo: runInfo{Date: "2026-11-25", Machine: "a 2-core VM"}, Benchmarks: []goBenchmark{{Name: "BenchmarkIdlePass", PerOp: "26–32 µs", Allocated: "13.1 KB, 207 allocs"}}}
	if err := writeData(dataPath(data, "backup-restore", "go-benchmarks"), kept); err != nil {
		t.Fatal(err)
	}
	if err := runBackupRestore([]string{"-in", in, "-data", data, "-o", out, "-commit", "abc1234", "-date", "2026-11-29", "-machine", "2 cores"}); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, out)
	for _, want := range []string{
		"## Backups\n\nLast run: 2026-11-29, commit abc1234, 2 cores; `hack/bench/backup/run.sh`, etcd 3.5.21 serving, etcdctl 3.6.6; 256 MiB: best of two runs, 1 GiB: one run each.\n",
		"| local disk | `etcdctl snapshot save` | 199 | 100 % | 344 | 100 % | | | |\n",
		"| S3 | gzip | 130 | 66 % | 130 | 66 % | 524 MiB | 110 / 110 MiB | 62 / 62 MiB |\n",
		"## Restore data path\n\nLast run: 2026-11-29, commit abc1234, 2 cores; `hack/bench/restore/run.sh`, a 512 MiB database (2,048 values of 256 KiB; a 520 MiB snapshot), an in-process S3 server, etcd 3.5.21 release binaries; then, as a restore to a point, an archived hour of 10 writes/s (puts of 256 bytes, in chunks of a second, zstd) replayed from that store.\n",
		"| the operator reads the backup through and checks it | 0.9 s (580 MiB/s) |\n| etcd starts on the restored data and serves all keys | 1.0 s |\n| the archive's hour of changes (10 writes/s, 36000 revisions) read from the store and replayed | 13.5 s |\n| the whole data path | 15.4 s |\n",
		"## Go benchmarks of an idle cluster\n\nLast run: 2026-11-25, commit not recorded, a 2-core VM.\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("backup-restore.md lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "## A whole restore") {
		t.Errorf("a section with neither data nor report shows:\n%s", page)
	}
}

func TestRestoreOnClusterTimelineFromTheTestsReport(t *testing.T) {
	d := restoreOnClusterSection(runInfo{Date: "2026-11-29", Commit: "abc1234", Machine: "2 cores"}, benchreport.RestoreOnCluster{
		SizeMiB: 512, SnapshotMiB: 523.2, Members: 3, EtcdVersion: "3.5.21", CompletedSeconds: 35.2, PeakWorkingSetMiB: 11.4,
		Stages:         []benchreport.Stage{{Seconds: 1.2, Stage: "event BackupVerified"}, {Seconds: 21.4, Stage: "1 of 3 restored members Ready"}},
		InitContainers: []benchreport.InitContainer{{Name: "check-dns", Seconds: 2.1}, {Name: "fetch-backup", Seconds: 1}},
	})
	got, err := restoreOnClusterBody(marshalData(t, d))
	if err != nil {
		t.Fatal(err)
	}
	want := "Last run: 2026-11-29, commit abc1234, single node, 2 cores; `E2E_RESTORE_BENCH_MIB=512 bash hack/e2e.sh -run TestMeasureRestore`: " +
		"a 523 MiB snapshot, an empty 3-member etcd 3.5.21 cluster restored from it, 35 s from creating the EtcdRestore to `Completed`; " +
		"the restore operator's working set peaked at 11 MiB; seed init containers: `check-dns` 2 s, `fetch-backup` 1 s.\n\n" +
		"| seconds after the EtcdRestore was created | |\n|---|---|\n| 1 | event BackupVerified |\n| 21 | 1 of 3 restored members Ready |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// The check make verify runs: a page that differs from what its data renders is
// named, whatever made it differ.
func TestCheckResultsCatchesAPageThatIsNotItsData(t *testing.T) {
	chaos := chaosData{runInfo: runInfo{Date: "2026-11-25", Commit: "abc1234", Machine: "2 cores"},
		Scenarios: []chaosRow{{Scenario: "leader-kill", Ops: 10, Acked: 10, Linearizable: "yes", Passed: true}}}
	restore := restoreDataPathData{runInfo: runInfo{Machine: "a 2-core VM"},
		RestoreDataPath: benchreport.RestoreDataPath{Steps: []benchreport.RestoreStep{{Step: "`etcdutl snapshot restore`", Seconds: 0.9, MiBPerSecond: 590}}}}
	for _, c := range []struct {
		name string
		// change breaks the rendered tree in one way.
		change func(t *testing.T, data, pages string)
		// want is what the one problem must say; "" for none.
		want []string
	}{
		{"pages rendered from their data pass", func(*testing.T, string, string) {}, nil},
		{"a figure edited on the page is caught", func(t *testing.T, _, pages string) {
			p := filepath.Join(pages, "chaos.md")
			writeFile(t, p, strings.Replace(readFile(t, p), "| leader-kill | 10 |", "| leader-kill | 11 |", 1))
		}, []string{"chaos.md is not what its data", "chaos-*.json", "line 23", "make docs"}},
		{"a line added to the page is caught", func(t *testing.T, _, pages string) {
			p := filepath.Join(pages, "backup-restore.md")
			writeFile(t, p, readFile(t, p)+"\nA hand-written remark.\n")
		}, []string{"backup-restore.md is not what its data", "backup-restore-*.json"}},
		{"data changed without rendering the page is caught", func(t *testing.T, data, _ string) {
			d := chaos
			d.Commit = "def5678"
			if err := writeData(dataPath(data, "chaos", "matrix"), d); err != nil {
				t.Fatal(err)
			}
		}, []string{"chaos.md is not what its data", "commit def5678"}},
		{"a page deleted is caught", func(t *testing.T, _, pages string) {
			_ = os.Remove(filepath.Join(pages, "bench.md"))
		}, []string{"bench.md"}},
		{"a data file with a misspelt field is caught", func(t *testing.T, data, _ string) {
			writeFile(t, dataPath(data, "chaos", "matrix"), `{"machine":"2 cores","scenarioz":[]}`)
		}, []string{"chaos.md: its data does not render", "scenarioz"}},
		{"a data file no section reads is caught", func(t *testing.T, data, _ string) {
			writeFile(t, filepath.Join(data, "chaos-matrx.json"), `{}`)
		}, []string{"chaos-matrx.json is the data of no section"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			data, pages := filepath.Join(dir, "data"), filepath.Join(dir, "pages")
			if err := writeData(dataPath(data, "chaos", "matrix"), chaos); err != nil {
				t.Fatal(err)
			}
			if err := writeData(dataPath(data, "backup-restore", "restore-data-path"), restore); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(pages, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := runResults([]string{"-data", data, "-o", pages}); err != nil {
				t.Fatal(err)
			}
			c.change(t, data, pages)
			problems := checkResults(data, pages)
			if len(c.want) == 0 {
				if len(problems) != 0 {
					t.Errorf("problems: %q", problems)
				}
				return
			}
			if len(problems) != 1 {
				t.Fatalf("want one problem, got %q", problems)
			}
			for _, w := range c.want {
				if !strings.Contains(problems[0], w) {
					t.Errorf("the problem does not say %q: %s", w, problems[0])
				}
			}
		})
	}
}

// The committed pages are what their committed data renders (make verify
// checks the same).
func TestCommittedResultPagesAreWhatTheirDataRenders(t *testing.T) {
	for _, p := range checkResults("../../docs/results/data", "../../docs/results") {
		t.Error(p)
	}
}

// The report TestMeasureRestore writes (benchreport.RestoreOnCluster) is
// read as it is, field for field.
func TestRestoreOnClusterReportOfTheE2ETestIsRead(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "restore-on-cluster-20261129-010000.json"), `{
  "sizeMiB": 512, "snapshotMiB": 523.4, "members": 3, "etcdVersion": "3.5.21",
  "completedSeconds": 35.1, "peakWorkingSetMiB": 11.2,
  "stages": [{"seconds": 9.2, "stage": "seed pod created"}],
  "initContainers": [{"name": "restore-datadir", "seconds": 2.2}]
}`)
	got, err := backupRestoreSections(dir, "", runInfo{Date: "2026-11-29", Machine: "2 cores"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, ok := got["restore-on-cluster"].(restoreOnClusterData)
	if !ok || len(d.Timeline) != 1 || d.Timeline[0] != (timelineRow{At: "9", What: "seed pod created"}) || !strings.Contains(d.Run, "`restore-datadir` 2 s") {
		t.Errorf("sections: %+v", got)
	}
}

// Output of `go test -run '^$' -bench . -benchmem -count 2 ./pkg/cluster/`
// (shortened), with another package's benchmark around it.
const goBenchOutput = `goos: linux
pkg: github.com/openetcd/etcd-operator/pkg/backup
BenchmarkBackup-2   	       1	 912345678 ns/op	 1000 B/op	      10 allocs/op
pkg: github.com/openetcd/etcd-operator/pkg/cluster
cpu: AMD EPYC
BenchmarkIdlePass-2             	      20	     23088 ns/op	   13472 B/op	     206 allocs/op
BenchmarkIdlePass-2             	      20	     24060 ns/op	   13472 B/op	     206 allocs/op
BenchmarkEtcdRead/dialled-2     	      20	  12427520 ns/op	  319664 B/op	    3285 allocs/op
BenchmarkEtcdRead/dialled-2     	      20	   2494064 ns/op	  299657 B/op	    3224 allocs/op
BenchmarkEtcdRead/cached-2                      	      20	    755823 ns/op	   97116 B/op	    1168 allocs/op
BenchmarkEtcdRead/cached-2                      	      20	    675184 ns/op	   95246 B/op	    1168 allocs/op
BenchmarkCachedClientMemory-2                   	      20	 116629849 ns/op	     88965 heap-B/client	 7671194 B/op	   87683 allocs/op
BenchmarkCachedClientMemory-2                   	      20	 113747454 ns/op	    103219 heap-B/client	 7651076 B/op	   87642 allocs/op
PASS
ok  	github.com/openetcd/etcd-operator/pkg/cluster	7.838s
`

func TestGoBenchmarksFromGoTestOutput(t *testing.T) {
	last := goBenchmarksData{Benchmarks: []goBenchmark{{Name: "BenchmarkIdlePass", About: "a healthy cluster of three at rest, no write"}}}
	d, err := goBenchmarksSection(runInfo{Date: "2026-11-29", Commit: "abc1234", Machine: "2 cores"}, goBenchOutput, last)
	if err != nil {
		t.Fatal(err)
	}
	got, err := goBenchmarksBody(marshalData(t, d))
	if err != nil {
		t.Fatal(err)
	}
	want := "Last run: 2026-11-29, commit abc1234, 2 cores; `make bench-go` (`pkg/cluster/idle_bench_test.go`, the range of two runs; " +
		"real etcd in the process, so times include the server's side and are noisy; allocations are exact).\n\n" +
		"| benchmark | per op | allocated per op |\n|---|---|---|\n" +
		"| `BenchmarkIdlePass` (a healthy cluster of three at rest, no write) | 23–24 µs | 13.5 KB, 206 allocs |\n" +
		"| `BenchmarkEtcdRead/dialled` | 2.5–12 ms | 300–320 KB, 3 224–3 285 allocs |\n" +
		"| `BenchmarkEtcdRead/cached` | 675–756 µs | 95.2–97.1 KB, 1 168 allocs |\n" +
		"| `BenchmarkCachedClientMemory` | 89.0–103 KB | – |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

const etcdReleasesOutput = `goos: linux
goarch: amd64
pkg: github.com/openetcd/etcd-operator/pkg/util/etcdutil
cpu: AMD EPYC
BenchmarkLearnerPromotion/etcd-3.6.16-2         	       4	 275028307 ns/op	         4.250 refusals/op	  587974 B/op	    8049 allocs/op
BenchmarkLearnerPromotion/etcd-3.7.3-2          	       5	 242785697 ns/op	         4.200 refusals/op	  585246 B/op	    8220 allocs/op
BenchmarkLeaseKeepAliveUnderWrites/etcd-3.6.16/saturating/to-leader-2         	    1058	    995798 ns/op	        52.00 max-apply-lag-entries	         0.2142 p50-ms	  34253 B/op	     390 allocs/op
BenchmarkLeaseKeepAliveUnderWrites/etcd-3.7.3/saturating/to-leader-2          	    3496	    293059 ns/op	        43.00 max-apply-lag-entries	         0.1645 p50-ms	  10746 B/op	     146 allocs/op
BenchmarkLearnerPromotion/etcd-3.6.16-2         	       4	 266298464 ns/op	         4.500 refusals/op	  608464 B/op	    8513 allocs/op
BenchmarkLearnerPromotion/etcd-3.7.3-2          	       4	 280817375 ns/op	         4.750 refusals/op	  638752 B/op	    9048 allocs/op
BenchmarkLeaseKeepAliveUnderWrites/etcd-3.6.16/saturating/to-leader-2         	    1058	    521010 ns/op	        4.000 max-apply-lag-entries	         0.2882 p50-ms	  34253 B/op	     390 allocs/op
PASS
ok  	github.com/openetcd/etcd-operator/pkg/util/etcdutil	71.117s
`

func TestEtcdReleasesSideBySideFromGoTestOutput(t *testing.T) {
	d, ok := etcdReleasesSection(runInfo{Date: "2026-11-29", Commit: "abc1234", Machine: "2 cores"}, etcdReleasesOutput)
	if !ok {
		t.Fatal("no etcd release benchmark found in the output")
	}
	got, err := etcdReleasesBody(marshalData(t, d))
	if err != nil {
		t.Fatal(err)
	}
	want := "| benchmark | figure | etcd 3.6.16 | etcd 3.7.3 |\n|---|---|---|---|\n" +
		"| `BenchmarkLearnerPromotion` | per op | 266–275 ms | 243–281 ms |\n" +
		"| | refusals/op | 4.2–4.5 | 4.2–4.8 |\n" +
		"| `BenchmarkLeaseKeepAliveUnderWrites/saturating/to-leader` | per op | 521–996 µs | 293 µs |\n" +
		"| | max-apply-lag-entries | 4.0–52 | 43 |\n" +
		"| | p50-ms | 0.21–0.29 | 0.16 |\n"
	if !strings.HasPrefix(got, "Last run: 2026-11-29, commit abc1234, 2 cores; `make bench-go` (`pkg/util/etcdutil/releases_bench_test.go`, the range of two runs;") {
		t.Errorf("provenance line:\n%s", got)
	}
	if !strings.HasSuffix(got, want) {
		t.Errorf("got\n%s\nwant the table\n%s", got, want)
	}
}

func TestGoBenchmarkOutputOfOnlyTheEtcdReleasesWritesOnlyTheirSection(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "go-benchmarks-20261129-120000.txt"), etcdReleasesOutput)
	got, err := backupRestoreSections(dir, "", runInfo{Machine: "2 cores"}, data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["etcd-releases"]; !ok || len(got) != 1 {
		t.Errorf("sections written = %v, want etcd-releases alone", slices.Collect(maps.Keys(got)))
	}
}

const archiveBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/openetcd/etcd-operator/pkg/backup/archive
cpu: AMD EPYC
BenchmarkArchiveUnderSteadyWrites-2   	   20000	    180000 ns/op	         0.4000 last-write-stored-after-s	         0.8100 max-lag-s	       900.0 max-lag-revisions	         0.3300 mean-lag-s	      1.000 interval-s	      5200 writes/s
BenchmarkReplayAnHourOfChanges-2   	       1	12100000000 ns/op	      3035 revisions/s	        11.86 seconds-per-hour	        10.00 writes/s-in-the-hour
BenchmarkArchiveUnderSteadyWrites-2   	   20000	    190000 ns/op	         0.5000 last-write-stored-after-s	         0.9100 max-lag-s	       950.0 max-lag-revisions	         0.3500 mean-lag-s	      1.000 interval-s	      5000 writes/s
BenchmarkReplayAnHourOfChanges-2   	       1	13200000000 ns/op	      2800 revisions/s	        12.90 seconds-per-hour	        10.00 writes/s-in-the-hour
PASS
ok  	github.com/openetcd/etcd-operator/pkg/backup/archive	71.117s
`

func TestTheArchiveSectionFromGoTestOutput(t *testing.T) {
	d, ok := archiveBenchSection(runInfo{Date: "2026-11-29", Commit: "abc1234", Machine: "2 cores"}, archiveBenchOutput)
	if !ok {
		t.Fatal("no archive benchmark found in the output")
	}
	got, err := archiveBenchBody(marshalData(t, d))
	if err != nil {
		t.Fatal(err)
	}
	want := "| benchmark | figure | range over the runs |\n|---|---|---|\n" +
		"| `BenchmarkArchiveUnderSteadyWrites` | interval-s | 1.0 |\n" +
		"| | last-write-stored-after-s | 0.40–0.50 |\n" +
		"| | max-lag-revisions | 900–950 |\n" +
		"| | max-lag-s | 0.81–0.91 |\n" +
		"| | mean-lag-s | 0.33–0.35 |\n" +
		"| | writes/s | 5000–5200 |\n" +
		"| `BenchmarkReplayAnHourOfChanges` | revisions/s | 2800–3035 |\n" +
		"| | seconds-per-hour | 12–13 |\n" +
		"| | writes/s-in-the-hour | 10 |\n"
	if !strings.HasPrefix(got, "Last run: 2026-11-29, commit abc1234, 2 cores; `make bench-go` (`pkg/backup/archive/bench_test.go`, the range of two runs;") {
		t.Errorf("provenance line:\n%s", got)
	}
	if !strings.HasSuffix(got, want) {
		t.Errorf("got\n%s\nwant the table\n%s", got, want)
	}
	dir, data := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "go-benchmarks-20261129-120000.txt"), archiveBenchOutput)
	sections, err := backupRestoreSections(dir, "", runInfo{Machine: "2 cores"}, data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sections["archive"]; !ok || len(sections) != 1 {
		t.Errorf("sections written = %v, want archive alone", slices.Collect(maps.Keys(sections)))
	}
}

func TestSignificantDigitsOfAValueARoundingCarries(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0.9966, "1.0"},
		{0.9949, "0.99"},
		{9.96, "10"},
		{1.004, "1.0"},
		{0.452, "0.45"},
		{2965, "2965"},
	} {
		if got := significant(tc.v, 2); got != tc.want {
			t.Errorf("significant(%v, 2) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
