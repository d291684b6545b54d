package etcdtest

import (
	"fmt"
	"net"
	"testing"
)

// TestPortsAreFreeAndOutsideTheEphemeralRange: the ports a test server will
// bind a moment later are not ones the kernel hands to outgoing connections
// meanwhile, are distinct, and can be bound.
func TestPortsAreFreeAndOutsideTheEphemeralRange(t *testing.T) {
	low, high := portsBelowEphemeral()
	ports := FreePorts(t, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		if p < low || p >= high {
			t.Errorf("port %d is outside %d-%d: the kernel may give it to an outgoing connection", p, low, high-1)
		}
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d cannot be bound: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}
