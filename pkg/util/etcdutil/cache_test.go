package etcdutil

import (
	"testing"
)

// TestClientCache: calls through a cache share one client per set of
// endpoints, at most two are kept, and a client whose call failed is closed.
func TestClientCache(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	waitHealthy(t, ClientConfig{Endpoints: c.endpoints()}, 3)
	cache := &ClientCache{}
	t.Cleanup(cache.Close)
	a := ClientConfig{Endpoints: []string{c.members[0].clientURL}, Cache: cache, DialTimeout: shortDial, RequestTimeout: shortRequest}
	b := ClientConfig{Endpoints: []string{c.members[1].clientURL}, Cache: cache, DialTimeout: shortDial, RequestTimeout: shortRequest}
	both := ClientConfig{Endpoints: []string{c.members[0].clientURL, c.members[2].clientURL}, Cache: cache, DialTimeout: shortDial, RequestTimeout: shortRequest}

	for range 3 {
		if _, err := ClusterHealth(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		if _, err := ListMembers(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	if d := cache.Dials(); d != 1 {
		t.Errorf("six calls to the same endpoint dialled %d clients, want 1", d)
	}
	if _, err := ListMembers(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if _, err := ListMembers(t.Context(), both); err != nil {
		t.Fatal(err)
	}
	if d, n := cache.Dials(), cache.Len(); d != 3 || n != 2 {
		t.Errorf("three sets of endpoints: %d dials and %d clients kept, want 3 and 2", d, n)
	}

	c.members[1].stop()
	if _, err := ListMembers(t.Context(), b); err == nil {
		t.Fatal("a call to a stopped member succeeded")
	}
	if n := cache.Len(); n != 1 {
		t.Errorf("after a failed call %d clients are kept, want 1 (the failed one closed)", n)
	}
	cache.Close()
	if n := cache.Len(); n != 0 {
		t.Errorf("after Close %d clients are kept, want 0", n)
	}
	if _, err := ListMembers(t.Context(), a); err != nil {
		t.Errorf("a closed cache dials again: %v", err)
	}
}
