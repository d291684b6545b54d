package framework

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/checker"
)

func TestCheckerCommand(t *testing.T) {
	plain := checkerCommand("checker-1", CheckerPod{Cluster: "c", Scenario: "s", Duration: time.Minute, Settle: time.Minute})
	if !slices.Contains(plain, "-prefix=/etcd-checker/checker-1/") {
		t.Errorf("the pod does not write under a prefix of its own: %q", plain)
	}
	if !slices.Contains(plain, "-endpoints=http://c-client:2379") || slices.ContainsFunc(plain, func(a string) bool { return strings.HasPrefix(a, "-cacert") }) {
		t.Errorf("a cluster without TLS: %q", plain)
	}
	if slices.ContainsFunc(plain, func(a string) bool { return strings.HasPrefix(a, "-check-timeout") }) {
		t.Errorf("no check timeout asked for, yet one given: %q", plain)
	}
	secure := checkerCommand("checker-2", CheckerPod{Cluster: "c", Scenario: "s", Duration: time.Minute, Settle: time.Minute, TLSSecret: "c-client", Rate: 10, Clients: 2, CheckTimeout: 30 * time.Second})
	for _, want := range []string{
		"-check-timeout=30s",
		"-endpoints=https://c-client:2379",
		"-cacert=" + ClientTLSMountDir + "/etcd-client-ca.crt",
		"-cert=" + ClientTLSMountDir + "/etcd-client.crt",
		"-key=" + ClientTLSMountDir + "/etcd-client.key",
		"-rate=10",
		"-clients=2",
	} {
		if !slices.Contains(secure, want) {
			t.Errorf("a TLS cluster's checker lacks %s: %q", want, secure)
		}
	}
}

// The visualisation printed into the pod's log lands in the artifact directory
// under the scenario's name, and the result points at it.
func TestCheckerSavesTheVisualization(t *testing.T) {
	html := []byte("<html>porcupine</html>")
	var log bytes.Buffer
	log.WriteString("level=error msg=FAILED\n")
	if err := checker.WriteArtifact(&log, filepath.Base(checkerVisualization), html); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Checker{Name: "checker-1", artifactDir: dir, scenario: "leader-kill"}
	r := checker.Result{Linearizable: "no", Visualization: checkerVisualization}
	if err := c.saveVisualization(&r, log.String()); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "leader-kill.html")
	if r.Visualization != want {
		t.Errorf("result points at %s, want %s", r.Visualization, want)
	}
	if got, err := os.ReadFile(want); err != nil || !bytes.Equal(got, html) {
		t.Errorf("%s holds %q (%v), want %q", want, got, err, html)
	}
	if !strings.Contains(r.String(), "visualization="+want) {
		t.Errorf("the result line does not name the visualization: %s", r)
	}
}

func TestAddressesReached(t *testing.T) {
	log := strings.Join([]string{
		`level=info msg="connection client 0: answered by member m0 (a355b98adf988e7e) at 10.88.0.12:2379"`,
		`level=info msg="connection client 1: failed at 10.88.0.40:2379: rpc error: code = Unimplemented desc = 404"`,
		`level=info msg="connection client 2: answered by member m0 (a355b98adf988e7e) at 10.88.0.12:2379"`,
		`level=info msg="connection watch: failed at [fd00::7]:2379: no leader"`,
		`level=info msg="connection read-back: failed: context deadline exceeded"`,
		`level=info msg="the run begins on cluster 16380c5a6a2b5e4f, members m0=a355b98adf988e7e"`,
	}, "\n")
	got := AddressesReached(log)
	want := []string{"10.88.0.12", "10.88.0.40", "fd00::7"}
	if !slices.Equal(got, want) {
		t.Errorf("AddressesReached = %q, want %q", got, want)
	}
	if got := AddressesReached("workload done, reading back"); len(got) != 0 {
		t.Errorf("a log naming no address gave %q", got)
	}
}
