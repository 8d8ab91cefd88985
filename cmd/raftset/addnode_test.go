package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/cluster"
	"raftset/internal/testutil"
)

// TestShardedAddNode: three processes holding two shards of three replicas
// (`raftset cluster create`), and a fourth, n4, started empty with the
// same peers and shard-map (which name it nowhere) and its own id and
// ports: it learns the map from the metadata voters and redirects.
// `raftset cluster add-node` records it; `raftset cluster rebalance
// --replicas` moves a replica onto it (shard 1's, from n1, which leads
// it) while go-redis's ClusterClient adds members, which must see no
// error. Afterwards n4 is a voter of the shard it took (RAFT.INFO on its
// members), every acknowledged member is present and nothing else, each
// process's DBSIZE counts the keys of the shards it holds once, every
// process's CLUSTER NODES lists the 4 nodes; given shard 0 too, n4 keeps
// shard 1 as its home, also once restarted, when it resumes both
// replicas; and redis-cli --cluster check is OK.
func TestShardedAddNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 3, 2, 3)
	agreedMasters(t, nodes, "both shards to have a master on every node", func(m map[string]string) bool { return len(m) == 2 })
	// n1 leads shard 1, whose replica the rebalance moves from n1 to n4:
	// the move removes the shard's leader, every run.
	leadShard(t, nodes[0], 1)
	c1 := dial(t, nodes[0].addr)
	agreedMasters(t, nodes, "n1 to master shard 1 on every node", func(m map[string]string) bool { return len(m) == 2 && m["8192-16383"] == "n1" })

	// n4: the first three's directives, its own id and ports.
	port, raftAddr := testutil.FreePort(t), fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n4 := &clusterProc{id: "n4", dir: filepath.Join(t.TempDir(), "n4"), addr: fmt.Sprintf("127.0.0.1:%d", port)}
	for i := 0; i < len(nodes[0].extra); i += 2 {
		switch v := nodes[0].extra[i+1]; nodes[0].extra[i] {
		case "--port":
			v = fmt.Sprint(port)
			n4.extra = append(n4.extra, "--port", v)
		case "--raft-addr":
			n4.extra = append(n4.extra, "--raft-addr", raftAddr)
		case "--node-id":
			n4.extra = append(n4.extra, "--node-id", "n4")
		default:
			n4.extra = append(n4.extra, nodes[0].extra[i], v)
		}
	}
	n4.start(t)
	waitWritable(t, n4.addr) // -MOVED from the replicated map
	c4 := dial(t, n4.addr)
	if r := do(t, c4, "KEYS", "*"); r != "-TRYAGAIN this node holds no replica yet: keyless commands run once it holds one (RAFT.SHARD ADDREPLICA, raftset cluster rebalance --replicas)\r\n" {
		t.Errorf("KEYS * on n4 before it holds a replica = %q", r)
	}
	if r := do(t, c4, "DBSIZE"); r != ":0\r\n" {
		t.Errorf("DBSIZE on n4 before it holds a replica = %q", r)
	}
	if r := testutil.ParseReply(do(t, c4, "CLUSTER", "NODES")).Str; !strings.Contains(r, cluster.ClusterNodeID("n4")+" "+n4.addr+"@") ||
		!strings.Contains(r, " myself,master - 0 0 ") {
		t.Errorf("CLUSTER NODES on n4 before add-node = %q, want n4 as myself,master of no slot", r)
	}

	var out, errOut strings.Builder
	if code := run([]string{"cluster", "add-node", "--addr", nodes[1].addr, "n4@" + n4.addr + "," + raftAddr}, &out, &errOut); code != 0 ||
		out.String() != fmt.Sprintf("added node n4 (client %s, raft %s)\n", n4.addr, raftAddr) {
		t.Fatalf("add-node: exit %d, %q %s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	wantErr := "raftset cluster add-node: " + nodes[0].addr + ": ERR ADDNODE: client address " + n4.addr + " is node n4's\n"
	if code := run([]string{"cluster", "add-node", "--addr", nodes[0].addr, "n5@" + n4.addr + ",127.0.0.1:1"}, &out, &errOut); code != 1 || errOut.String() != wantErr {
		t.Errorf("add-node of n4's address again: exit %d, %q, want %q", code, errOut.String(), wantErr)
	}

	// rebalance plans from the map of the node it asks, which learns a
	// change within a map refresh: every process does.
	waitMaps(t, append(slices.Clone(nodes), n4), "with n4's record", func(m *cluster.ShardMap) bool {
		return m.Nodes["n4"] == cluster.NodeRecord{Client: n4.addr, Raft: raftAddr}
	})
	// Every process lists n4 as Redis lists a node just added, a master of
	// no slot, and redis-cli --cluster check agrees.
	n4Line := cluster.ClusterNodeID("n4") + " " + n4.addr + "@" + strings.Split(raftAddr, ":")[1] + " "
	for _, cp := range append(slices.Clone(nodes), n4) {
		lines := strings.Split(strings.TrimSpace(testutil.ParseReply(do(t, dial(t, cp.addr), "CLUSTER", "NODES")).Str), "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, n4Line) })
		if len(lines) != 4 || i < 0 || !strings.Contains(lines[i], "master - 0 0 ") || !strings.HasSuffix(lines[i], " connected") {
			t.Errorf("%s's CLUSTER NODES before the rebalance =\n%s\nwant 4 lines, n4 a master of no slot", cp.id, strings.Join(lines, "\n"))
		}
	}
	clusterCheck(t, n4.addr)
	for _, cp := range append(slices.Clone(nodes), n4) {
		t.Logf("%s: %s", cp.id, cp.addr)
	}
	ctx := context.Background()
	rdb := clusterClient(t, 10*time.Second, append([]*clusterProc{n4}, nodes...)...)
	// Writers: each adds its own members to a few keys; a member whose
	// SADD failed (an unknown outcome) may or may not be there. The client
	// must surface no error: the move hands shard 1's leadership over
	// before n1 leaves (without that, go-redis gave up on MOVED loops).
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("an:%d", i))
	}
	cw := &clusterWriters{keys: keys}
	cw.start(ctx, rdb, 4)
	cw.waitWrites(t, 100)

	out.Reset()
	errOut.Reset()
	wantPlan := "move shard 1's replica from n1 to n4\nreplicas per node: n1=1 n2=2 n3=2 n4=1\n"
	if code := run([]string{"cluster", "rebalance", "--replicas", "--dry-run", "--addr", n4.addr}, &out, &errOut); code != 0 || out.String() != wantPlan {
		t.Fatalf("rebalance --replicas --dry-run: exit %d, %q %s, want %q", code, out.String(), errOut.String(), wantPlan)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"cluster", "rebalance", "--replicas", "--addr", nodes[2].addr, "--timeout", "3m"}, &out, &errOut); code != 0 ||
		out.String() != strings.Replace(wantPlan, "move", "moved", 1) {
		t.Fatalf("rebalance --replicas: exit %d, %q %s", code, out.String(), errOut.String())
	}
	all := append(slices.Clone(nodes), n4)
	m := waitMaps(t, all, "with shard 1 on n2, n3, n4", func(m *cluster.ShardMap) bool {
		sh, _ := m.Shard(1)
		return slices.Equal(slices.Sorted(slices.Values(sh.Members)), []string{"n2", "n3", "n4"})
	})
	waitVoters(t, m, all)
	// Writes go on after the move; then each process stores the keys of
	// the shards it holds now once (n1 shard 0's, n4 shard 1's).
	cw.waitWrites(t, 100)
	cw.stopAndCheck(t, ctx, rdb, all)
	cw.checkNoErrors(t, "the rebalance")
	t.Logf("%d SADDs acknowledged, %d with an unknown outcome", cw.count.Load(), cw.maybeCount())
	for _, cp := range all {
		c := dial(t, cp.addr)
		var lines []string
		testutil.WaitFor(t, 30*time.Second, cp.id+"'s CLUSTER NODES to list 4 nodes", func() bool {
			lines = strings.Split(strings.TrimSpace(testutil.ParseReply(do(t, c, "CLUSTER", "NODES")).Str), "\n")
			return len(lines) == 4
		})
		if !strings.Contains(strings.Join(lines, "\n"), cluster.ClusterNodeID("n4")+" "+n4.addr+"@") {
			t.Errorf("%s's CLUSTER NODES has no line for n4 at %s:\n%s", cp.id, n4.addr, strings.Join(lines, "\n"))
		}
	}
	// Given shard 0 too, a lower id, n4 keeps its first replica, shard 1,
	// as its home: the map says so (a home line), and RAFT.INFO, which
	// runs on the home shard, lists shard 1's three members, not shard
	// 0's four; also after the restart below, which starts the map's
	// home first (before the map recorded homes, the restart made shard
	// 0 its home).
	if r := do(t, c1, "RAFT.SHARD", "ADDREPLICA", "0", "n4"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDREPLICA 0 n4 = %q", r)
	}
	testutil.WaitFor(t, 30*time.Second, "n4's map to name shard 1 its home", func() bool {
		return strings.Contains(testutil.ParseReply(do(t, c4, "RAFT.SHARD", "MAP")).Str, "\nhome n4 1\n")
	})
	homeIsShard1 := func() bool {
		info := do(t, c4, "RAFT.INFO")
		return strings.Contains(info, "member2:id=") && !strings.Contains(info, "member3:") && strings.Contains(info, "id=n4,suffrage=voter")
	}
	if !homeIsShard1() {
		t.Errorf("RAFT.INFO on n4 with shards 0 and 1 = %q, want shard 1's (its home)", do(t, c4, "RAFT.INFO"))
	}
	// Restarted with the same directives (still naming it nowhere), n4
	// resumes its replicas from dir/shards/1 and dir once it has the map
	// again.
	n4.p.stop(t)
	n4.start(t)
	waitWritable(t, n4.addr)
	c4 = dial(t, n4.addr)
	testutil.WaitFor(t, 30*time.Second, "n4 to resume its replica of shard 1 as a voter", func() bool {
		return strings.Contains(do(t, c4, "RAFT.SHARD", "1", "RAFT.INFO"), "id=n4,suffrage=voter")
	})
	testutil.WaitFor(t, 30*time.Second, "n4 to resume its replica of shard 0", func() bool {
		return strings.Contains(do(t, c4, "RAFT.SHARD", "0", "RAFT.INFO"), "id=n4,suffrage=voter")
	})
	if !homeIsShard1() {
		t.Errorf("RAFT.INFO on n4 after its restart = %q, want shard 1's (its home)", do(t, c4, "RAFT.INFO"))
	}
	// A linearizable DBSIZE on a replica asks its leader, which the
	// restarted replica may not know yet (-TRYAGAIN).
	dbsize := ""
	testutil.WaitFor(t, 30*time.Second, "DBSIZE on n4 after its restart", func() bool {
		dbsize = do(t, c4, "DBSIZE")
		return !strings.HasPrefix(dbsize, "-TRYAGAIN")
	})
	if dbsize == ":0\r\n" || !strings.HasPrefix(dbsize, ":") {
		t.Errorf("DBSIZE on n4 after its restart = %q, want its shards' keys", dbsize)
	}
	// redis-cli --cluster check sends every node DBSIZE and wants one
	// view: after the restart, once both shards' leaders are known again.
	agreedMasters(t, all, "both shards to have a master on every node after n4's restart", func(m map[string]string) bool { return len(m) == 2 })
	for _, cp := range []*clusterProc{nodes[0], n4} {
		clusterCheck(t, cp.addr)
	}
}

// TestNodeWithoutReplicaStartRefusals: a node the shard map names in no
// shard starts only where it can learn the map (the first shard's members
// with their client addresses in shard-map).
func TestNodeWithoutReplicaStartRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no voter address", []string{"--shard-map", "0:0-16383:n1"},
			`start raft: cluster: node "n4" is a member of no shard in the shard map, and the map gives no client address of shard 0's members (id@host:port), the metadata voters it would learn the replicated map from`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--dir", t.TempDir(), "--node-id", "n4", "--port", fmt.Sprint(testutil.FreePort(t)),
				"--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--cluster-enabled", "yes",
				"--peers", "n1=127.0.0.1:1"}, tc.args...)
			cfg, err := LoadConfig(args)
			if err != nil {
				t.Fatal(err)
			}
			n, err := start(cfg, io.Discard)
			if err == nil {
				_ = n.close()
				t.Fatalf("start(%q) succeeded", args)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("start(%q) = %v, want %s", args, err, tc.wantErr)
			}
		})
	}
}

// TestNodeWithoutReplicaMetrics: a process that holds no replica yet starts
// with metrics-addr: /livez answers, /readyz says it holds no replica, and
// /metrics has the process's series and no shard's.
func TestNodeWithoutReplicaMetrics(t *testing.T) {
	maddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	args := []string{"--dir", t.TempDir(), "--node-id", "n4", "--port", fmt.Sprint(testutil.FreePort(t)),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--cluster-enabled", "yes",
		"--peers", "n1=127.0.0.1:1", "--shard-map", "0:0-16383:n1@127.0.0.1:2", "--metrics-addr", maddr}
	cfg, err := LoadConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(cfg, io.Discard)
	if err != nil {
		t.Fatalf("start(%q): %v", args, err)
	}
	defer n.close()
	if code, body := httpGet(t, "http://"+maddr+"/livez", ""); code != 200 || body != "ok\n" {
		t.Errorf("/livez = %d %q, want 200 \"ok\\n\"", code, body)
	}
	if code, body := httpGet(t, "http://"+maddr+"/readyz", ""); code != 503 || body != "this node holds no replica yet\n" {
		t.Errorf("/readyz = %d %q, want 503 \"this node holds no replica yet\\n\"", code, body)
	}
	fams := scrape(t, maddr)
	for _, fam := range []string{"raftset_ready", "raftset_memory_heap_bytes", "raftset_memory_rss_bytes",
		"raftset_connected_clients", "process_cpu_seconds_total", "go_goroutines"} {
		if _, ok := fams[fam]; !ok {
			t.Errorf("/metrics has no %s", fam)
		}
	}
	if v, _ := value(fams, "raftset_ready"); v != 0 {
		t.Errorf("raftset_ready = %v, want 0", v)
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "shard" {
					t.Errorf("a process holding no replica exports %s{shard=%q}", name, l.GetValue())
				}
			}
		}
	}
	for _, fam := range []string{"raftset_raft_term", "raftset_raft_applied_index", "raftset_keys", "raftset_raft_is_leader"} {
		if _, ok := fams[fam]; ok {
			t.Errorf("a process holding no replica exports %s", fam)
		}
	}
}
