package tools

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAddressesNothingServesStayOnTheHost runs lib.sh's
// setup_unrouted_ranges in a network namespace of its own whose default
// route leads out, as the host's does: a pod address no node routes must
// be unreachable and a Service address must go to the dropping device,
// never out by the default route (where an egress proxy answers anything),
// and remove_unrouted_ranges must take both away again.
func TestAddressesNothingServesStayOnTheHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a network namespace: run it as root, as make test does on this project's machines")
	}
	script := `set -o errexit -o nounset -o pipefail
source local-cluster/lib.sh
ip link set lo up
ip link add out type bridge
ip addr add 192.0.2.2/24 dev out
ip link set out up
ip route add default via 192.0.2.1
setup_unrouted_ranges
setup_unrouted_ranges # twice is fine
echo "pod: $(ip route get 10.244.7.7 2>&1 | head -1)"
echo "service: $(ip route get 10.96.3.4 2>&1 | head -1)"
echo "outside: $(ip route get 203.0.113.9 2>&1 | head -1)"
remove_unrouted_ranges
echo "pod after: $(ip route get 10.244.7.7 2>&1 | head -1)"
echo "service after: $(ip route get 10.96.3.4 2>&1 | head -1)"`
	out, err := exec.Command("unshare", "--net", "bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("setup_unrouted_ranges: %v\n%s", err, out)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		lines[k] = v
	}
	for _, c := range []struct{ key, want, not string }{
		{"pod", "No route to host", "via 192.0.2.1"},
		{"service", "dev eol-services", "via 192.0.2.1"},
		{"outside", "via 192.0.2.1", ""},
		{"pod after", "via 192.0.2.1", ""},
		{"service after", "via 192.0.2.1", ""},
	} {
		got := lines[c.key]
		if !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("%s: ip route get says %q, want %q in it\n%s", c.key, got, c.want, out)
		}
	}
}
