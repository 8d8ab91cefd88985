package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/cluster"
	"raftset/internal/testutil"
)

// TestShardedMetaVoters: four processes from `raftset cluster create` (2
// shards × 3 replicas; the first shard's members are the metadata voters,
// the fourth process is outside the group). `raftset cluster add-meta` of
// the outsider prints the four voters and every process's map names them;
// `remove-meta` of a first-shard member prints the three left, its process
// closes its replica (dir/meta/left) and `RAFT.SHARD MAP` on it still
// follows the map; `remove-node` of that node, refused before as a voter,
// then drains and removes it, and every process's map says so.
func TestShardedMetaVoters(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 4, 2, 3)
	agreedMasters(t, nodes, "two shards to have a master on every node", func(m map[string]string) bool { return len(m) == 2 })
	m := waitMaps(t, nodes, "bootstrapped", func(m *cluster.ShardMap) bool { return m.Epoch >= 1 })
	voters := slices.Sorted(slices.Values(m.Shards[0].Members))
	var outsider, gone *clusterProc
	for _, cp := range nodes {
		switch {
		case !slices.Contains(voters, cp.id):
			outsider = cp
		case cp.id == voters[0]:
			gone = cp
		}
	}

	var out, errOut strings.Builder
	four := slices.Sorted(slices.Values(append(slices.Clone(voters), outsider.id)))
	want := "node " + outsider.id + " is a voter of the metadata group (voters: " + strings.Join(four, ",") + ")\n"
	if code := run([]string{"cluster", "add-meta", "--addr", outsider.addr, outsider.id}, &out, &errOut); code != 0 || out.String() != want {
		t.Fatalf("add-meta %s: exit %d, %q %s, want %q", outsider.id, code, out.String(), errOut.String(), want)
	}
	waitMaps(t, nodes, "naming four metadata voters", func(m *cluster.ShardMap) bool { return slices.Equal(m.Meta, four) })

	out.Reset()
	errOut.Reset()
	three := slices.DeleteFunc(slices.Clone(four), func(v string) bool { return v == gone.id })
	want = "node " + gone.id + " left the metadata group (voters: " + strings.Join(three, ",") +
		"): its replica closes within a map refresh, its directory meta stays\n"
	if code := run([]string{"cluster", "remove-meta", "--addr", outsider.addr, gone.id}, &out, &errOut); code != 0 || out.String() != want {
		t.Fatalf("remove-meta %s: exit %d, %q %s, want %q", gone.id, code, out.String(), errOut.String(), want)
	}
	waitMaps(t, nodes, "naming three metadata voters", func(m *cluster.ShardMap) bool { return slices.Equal(m.Meta, three) })
	left := filepath.Join(gone.dir, "meta", "left")
	testutil.WaitFor(t, 30*time.Second, gone.id+" to close its replica of the metadata group", func() bool {
		_, err := os.Stat(left)
		return err == nil
	})

	out.Reset()
	errOut.Reset()
	if code := run([]string{"cluster", "remove-node", "--addr", outsider.addr, "--timeout", "3m", gone.id}, &out, &errOut); code != 0 ||
		!strings.HasSuffix(out.String(), "removed node "+gone.id+"\nreplicas per node: "+twoEach(three)+"\nnode "+gone.id+
			" holds no replica and is out of the cluster: stop its process (its directory can be deleted)\n") {
		t.Fatalf("remove-node %s: exit %d, %q %s", gone.id, code, out.String(), errOut.String())
	}
	waitMaps(t, nodes, "without "+gone.id, func(m *cluster.ShardMap) bool {
		return slices.Contains(m.Removed, gone.id) && len(m.Hosts(gone.id)) == 0 && slices.Equal(m.Meta, three)
	})
}

// twoEach is "a=2 b=2 c=2": 2 shards × 3 replicas on the three
// nodes ids, sorted.
func twoEach(ids []string) string {
	var parts []string
	for _, id := range slices.Sorted(slices.Values(ids)) {
		parts = append(parts, id+"=2")
	}
	return strings.Join(parts, " ")
}
