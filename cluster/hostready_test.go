package cluster

import (
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestHostReadyNeedsEveryShard: a process is ready (/readyz) only while
// every shard it holds a replica of is: n1 holds shard 0 (its home) and
// shard 1; with shard 1's other two replicas closed, shard 1 has no leader
// and n1 is not ready, naming shard 1, while its home shard still is.
func TestHostReadyNeedsEveryShard(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n3,n4", 4)
	n1 := hosts[0]
	testutil.WaitFor(t, 30*time.Second, "n1 to be ready", func() bool { ok, _ := n1.Ready(); return ok })
	for _, h := range hosts[2:] { // n3 and n4: a majority of shard 1
		n, ok := h.Node(1)
		if !ok {
			t.Fatalf("%s holds no replica of shard 1", h.self)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var why string
	testutil.WaitFor(t, 30*time.Second, "n1 not ready for shard 1", func() bool {
		var ok bool
		ok, why = n1.Ready()
		return !ok && strings.HasPrefix(why, "shard 1: ")
	})
	if why != "shard 1: no leader" {
		t.Errorf("n1's readiness: %q, want %q", why, "shard 1: no leader")
	}
	if ok, homeWhy := n1.Home().Ready(); !ok {
		t.Errorf("n1's home shard is not ready (%q): shard 0 kept a majority", homeWhy)
	}
}
