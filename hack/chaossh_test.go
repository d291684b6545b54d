package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChaosRunsThePartsItIsAskedFor runs hack/chaos.sh in a copy of the tree
// whose hack/e2e.sh records what it was asked to run and writes one result
// line for each part it ran, as the e2e tests do. With no CHAOS_ONLY the
// matrix and the tenant control plane's scenarios run together and both
// sections of the page are written; CHAOS_ONLY=tenant runs only the tenant
// scenarios, adds no nodes and leaves the matrix's section as it was (no
// -in); CHAOS_ONLY=matrix leaves the tenant section alone; CHAOS_ONLY=nodes
// runs the three-node scenarios alone and merges their rows (-merge);
// anything else is refused before a test runs.
func TestChaosRunsThePartsItIsAskedFor(t *testing.T) {
	const (
		matrixLine = `{"scenario":"leader-kill","ops":10,"acked":10,"failed":0,"indeterminate":0,"linearizable":"yes","ackedLost":0,"longestUnavailableSeconds":1.2,"recoverySeconds":9.5,"test":"TestChaosLeaderKill","passed":true}`
		tenantLine = `{"scenario":"member-and-leader-kill","ops":9,"acked":9,"missing":0,"outOfOrder":0,"longestUnavailableSeconds":1.5,"readyzFailures":0,"longestNotReadySeconds":0,"longestSilentWatchSeconds":0.5,"errors":[{"message":"x","count":1}],"test":"TestTenantControlPlaneX","passed":true}`
		nodesLine  = `{"scenario":"zone-lost","ops":8,"acked":8,"failed":0,"indeterminate":0,"linearizable":"yes","ackedLost":0,"longestUnavailableSeconds":3.4,"recoverySeconds":60.1,"test":"TestNodesZoneLost","passed":true}`
	)
	for _, tc := range []struct {
		only string
		// ran: the -run of each suite, in order; docs: the gen-docs flags
		// that say which sections are written.
		ran, docs        []string
		results, tenants string // _output/chaos/results.json and tenant.json; "" for not written
		refused          string
	}{
		{only: "", ran: []string{"^(TestChaos|TestTenantControlPlane)", "^TestNodes"},
			docs:    []string{"-in _output/chaos/results.json -run 2 scenarios", "-tenant _output/chaos/tenant.json -tenant-run 1 scenarios alongside the matrix's"},
			results: "[\n" + matrixLine + ",\n" + nodesLine + "\n]\n", tenants: "[\n" + tenantLine + "\n]\n"},
		{only: "tenant", ran: []string{"^TestTenantControlPlane"},
			docs:    []string{"-in  -tenant _output/chaos/tenant.json -tenant-run 1 scenarios in "},
			tenants: "[\n" + tenantLine + "\n]\n"},
		{only: "matrix", ran: []string{"^TestChaos", "^TestNodes"},
			docs:    []string{"-in _output/chaos/results.json -run 2 scenarios in "},
			results: "[\n" + matrixLine + ",\n" + nodesLine + "\n]\n"},
		{only: "nodes", ran: []string{"^TestNodes"},
			docs:    []string{"-merge -machine three local nodes in zones a, b, c on this machine -in _output/chaos/results.json -run 1 scenarios in "},
			results: "[\n" + nodesLine + "\n]\n"},
		{only: "bogus", refused: "want matrix, tenant or nodes"},
	} {
		t.Run("CHAOS_ONLY="+tc.only, func(t *testing.T) {
			root := t.TempDir()
			bin := filepath.Join(root, "bin")
			for _, dir := range []string{"hack/local-cluster", "bin"} {
				if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			script, err := os.ReadFile("chaos.sh")
			if err != nil {
				t.Fatal(err)
			}
			asked, docs := filepath.Join(root, "asked"), filepath.Join(root, "gen-docs")
			for name, body := range map[string]string{
				"hack/chaos.sh":                  string(script),
				"hack/local-cluster/one-node.sh": "exit 0\n",
				"hack/local-cluster/up.sh":       "exit 0\n",
				"hack/local-cluster/lib.sh":      "K8S_VERSION=v1.32.9\n",
				// The suite records its -run and writes a line for each part it
				// was asked for, where the tests write theirs.
				"hack/e2e.sh": `printf '%s\n' "$2" >> ` + asked + `
d=$E2E_CHAOS_RESULTS
case $2 in *TestChaos*) echo '` + matrixLine + `' > "$d/leader-kill.json" ;; esac
case $2 in *TestTenantControlPlane*) mkdir -p "$d/tenant" && echo '` + tenantLine + `' > "$d/tenant/member-and-leader-kill.json" ;; esac
case $2 in *TestNodes*) echo '` + nodesLine + `' > "$d/zone-lost.json" ;; esac
`,
				"bin/git": "[ \"$1\" = rev-parse ] && echo abc1234\nexit 0\n",
				"bin/go":  `echo "$*" > ` + docs + "\n",
			} {
				if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", filepath.Join(root, "hack/chaos.sh"))
			cmd.Env = append(os.Environ(), "CHAOS_ONLY="+tc.only, "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			ran, _ := os.ReadFile(asked)
			if tc.refused != "" {
				if err == nil || !strings.Contains(string(out), tc.refused) {
					t.Errorf("chaos.sh exited with %v, printed\n%s\nwant a refusal saying %q", err, out, tc.refused)
				}
				if len(ran) > 0 {
					t.Errorf("the suite ran %q although the part was refused", ran)
				}
				return
			}
			if err != nil {
				t.Fatalf("chaos.sh: %v\n%s", err, out)
			}
			if got, want := strings.Fields(string(ran)), tc.ran; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("the suite was asked to run %q, want %q\n%s", got, want, out)
			}
			genDocs, _ := os.ReadFile(docs)
			for _, want := range tc.docs {
				if !strings.Contains(string(genDocs), want) {
					t.Errorf("gen-docs was run with %q, which lacks %q\n%s", genDocs, want, out)
				}
			}
			if tc.results == "" && strings.Contains(string(genDocs), "results.json") || tc.tenants == "" && strings.Contains(string(genDocs), "-tenant") {
				t.Errorf("gen-docs was run with %q: a part that did not run would replace its section", genDocs)
			}
			for file, want := range map[string]string{"results.json": tc.results, "tenant.json": tc.tenants} {
				got, err := os.ReadFile(filepath.Join(root, "_output/chaos", file))
				if want == "" {
					if err == nil {
						t.Errorf("%s was written by a run that left its part out:\n%s", file, got)
					}
					continue
				}
				if string(got) != want {
					t.Errorf("%s is\n%s\nwant\n%s", file, got, want)
				}
			}
		})
	}
}
