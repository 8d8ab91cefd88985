package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/cluster"
	"raftset/internal/slot"
	"raftset/internal/testutil"
)

// fakeProcessDir is a data directory with node-id n1 and an empty raft.db
// in each of the given group directories ("" is dir itself): enough for
// recover's choice of groups, which refuses before opening any.
func fakeProcessDir(t *testing.T, groups ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "node-id"), []byte("n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		d := filepath.Join(dir, g)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "raft.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRecoverRefusesGroups: raftset recover refuses, byte for byte and
// before rewriting anything, a group the directory does not hold, --shard
// on a process that is not sharded, a sharded directory without a group
// named, --meta on a process that is not a metadata voter, and --peers
// without this node.
func TestRecoverRefusesGroups(t *testing.T) {
	plain := fakeProcessDir(t, "")
	sharded := fakeProcessDir(t, "", "shards/1", "meta")
	shard1Only := fakeProcessDir(t, "shards/1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", sharded, "--shard", "2"}, sharded + " holds no shard 2 (shards 0, 1 and the metadata group)"},
		{[]string{"--dir", shard1Only, "--shard", "0"}, shard1Only + " holds no shard 0 (shard 1)"},
		{[]string{"--dir", plain, "--shard", "1"}, plain + " is not a sharded process's directory (shard 0): recover it without --shard"},
		{[]string{"--dir", sharded}, sharded + " is a sharded process's directory (shards 0, 1 and the metadata group): name the group that lost its quorum with --shard N or --meta"},
		{[]string{"--dir", shard1Only}, shard1Only + " is a sharded process's directory (shard 1): name the group that lost its quorum with --shard N or --meta"},
		{[]string{"--dir", shard1Only, "--shard", "1", "--meta"}, shard1Only + " holds no metadata group (shard 1): recover it on one of its voters, the processes of the shard-map directive's first shard or those the map's meta line names (RAFT.SHARD MAP)"},
		{[]string{"--dir", sharded, "--shard", "x"}, `--shard "x" is not a shard id`},
		{[]string{"--dir", sharded, "--shard", "0,1,2", "--meta"}, sharded + " holds no shard 2 (shards 0, 1 and the metadata group)"},
		{[]string{"--dir", sharded, "--shard", "1,"}, `--shard "" is not a shard id`},
		{[]string{"--dir", sharded, "--shard", "1", "--peers", "n2=127.0.0.1:1,n3=127.0.0.1:2"}, "--peers must include this node, n1"},
	} {
		var stdout, stderr strings.Builder
		code := run(append([]string{"recover"}, tc.args...), &stdout, &stderr)
		if want := "raftset recover: " + tc.want + "\n"; code != 1 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("recover %q: exit %d, stdout %q, stderr %q, want exit 1 and %q", tc.args, code, stdout.String(), stderr.String(), want)
		}
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"recover", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "--shard N") ||
		!strings.Contains(stderr.String(), "RAFT.SHARD REMOVEREPLICA") {
		t.Errorf("recover --help: exit %d, %q, want the sharded case described", code, stderr.String())
	}
}

// TestShardedRecoverLostShard: six processes, two shards of three replicas
// (`raftset cluster create`: shard 0 on n1-n3 with the metadata group,
// shard 1 on n4-n6). go-redis's ClusterClient writes a key in every 16th
// slot; n5 and n6 are killed for good, so shard 1 has no quorum: its slots
// answer errors while shard 0's take writes. recover refuses the running
// n1; n4, stopped, is rewritten by `raftset recover --shard 1` and
// restarted: every acknowledged key is
// there, and every slot takes writes. RAFT.SHARD REMOVEREPLICA of n5 and
// n6 (in no Raft configuration any more, their processes gone) and
// ADDREPLICA of n1 and n2 make the map and shard 1's group agree on three
// voters, CLUSTER NODES no longer lists the lost nodes, and redis-cli
// --cluster check is OK.
func TestShardedRecoverLostShard(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 6, 2, 3)
	n1, n4 := nodes[0], nodes[3]
	agreedMasters(t, nodes, "both shards to have a master on every node", func(m map[string]string) bool { return len(m) == 2 })
	ctx := context.Background()
	rdb := clusterClient(t, 10*time.Second, nodes...)
	keys := keyPerSlot()
	var written []string
	inShard1 := 0
	for s := 0; s < slot.Count; s += 16 {
		if err := rdb.SAdd(ctx, keys[s], "before").Err(); err != nil {
			t.Fatalf("SADD %s (slot %d): %v", keys[s], s, err)
		}
		written = append(written, keys[s])
		if s >= 8192 {
			inShard1++
		}
	}
	// Acknowledged means stored on a majority, which need not include n4:
	// the operator recovers the survivor with every write (the highest
	// applied index).
	c4 := dial(t, n4.addr)
	testutil.WaitFor(t, 30*time.Second, "n4 to hold shard 1's keys", func() bool {
		return do(t, c4, "DBSIZE") == fmt.Sprintf(":%d\r\n", inShard1)
	})

	nodes[4].p.kill9(t)
	nodes[5].p.kill9(t)
	k1 := keys[8192+5] // written to nowhere yet
	// Shard 1's slots fail: -MOVED to the lost leader while n4 still names
	// it, then an error a client recognises (-TRYAGAIN: no leader;
	// -CLUSTERDOWN: outcome unknown, n4 may have appended the write to its
	// log, and recover keeps every entry).
	lost := map[string]bool{nodes[4].addr: true, nodes[5].addr: true}
	testutil.WaitFor(t, 15*time.Second, "shard 1's write on n4 to fail without a leader", func() bool {
		r := do(t, c4, "SADD", k1, "x")
		if f := strings.Fields(r); strings.HasPrefix(r, "-MOVED ") && len(f) == 3 && lost[f[2]] {
			return false
		}
		if !strings.HasPrefix(r, "-TRYAGAIN") && !strings.HasPrefix(r, "-CLUSTERDOWN") {
			t.Fatalf("SADD in shard 1 without its quorum = %q, want -TRYAGAIN or -CLUSTERDOWN", r)
		}
		t.Logf("SADD in shard 1 without its quorum = %q", r)
		return true
	})
	if err := rdb.SAdd(ctx, keys[5], "during").Err(); err != nil {
		t.Errorf("SADD in shard 0 while shard 1 has no quorum: %v", err)
	}
	n4.p.stop(t)

	var stdout, stderr strings.Builder
	// A running process's groups are locked (n1 runs).
	if code := run([]string{"recover", "--dir", n1.dir, "--shard", "0", "--meta"}, &stdout, &stderr); code != 1 ||
		!strings.HasPrefix(stderr.String(), "raftset recover: shard 0: recover: open "+filepath.Join(n1.dir, "raft.db")+": ") ||
		!strings.HasSuffix(stderr.String(), " (stop the node first)\n") || stdout.Len() != 0 {
		t.Errorf("recover of the running n1: exit %d, stdout %q, stderr %q, want it refused", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"recover", "--dir", n4.dir, "--shard", "1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("raftset recover --shard 1 exited %d: %s", code, stderr.String())
	}
	raft4 := n4.extra[slices.Index(n4.extra, "--raft-addr")+1]
	if want := "node n4, shard 1: configuration is now n4=" + raft4 + " (voter) (every entry kept); "; !strings.Contains(stdout.String(), want) {
		t.Errorf("raftset recover printed %q, want %q", stdout.String(), want)
	}
	n4.start(t)
	waitWritable(t, n4.addr)

	for _, k := range written {
		if got, err := rdb.SMembers(ctx, k).Result(); err != nil || !slices.Equal(got, []string{"before"}) {
			t.Errorf("SMEMBERS %s (slot %d) after the recovery = %v, %v, want [before]", k, slot.Of([]byte(k)), got, err)
		}
	}
	pipe := rdb.Pipeline()
	for _, k := range keys {
		pipe.SAdd(ctx, k, "after")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Errorf("SADD in every slot after the recovery: %v", err)
	}

	// The map names n5 and n6 still; they leave it, n1 and n2 join.
	c1 := dial(t, n1.addr)
	for _, step := range [][]string{{"REMOVEREPLICA", "1", "n5"}, {"REMOVEREPLICA", "1", "n6"}, {"ADDREPLICA", "1", "n1"}, {"ADDREPLICA", "1", "n2"}} {
		if r := do(t, c1, append([]string{"RAFT.SHARD"}, step...)...); r != "+OK\r\n" {
			t.Fatalf("RAFT.SHARD %s = %q", strings.Join(step, " "), r)
		}
	}
	info := do(t, dial(t, n4.addr), "RAFT.SHARD", "1", "RAFT.INFO") // restarted since c4
	for _, mem := range []string{"n4", "n1", "n2"} {
		if !strings.Contains(info, "id="+mem+",suffrage=voter") {
			t.Errorf("shard 1's RAFT.INFO on n4 lists no voter %s:\n%s", mem, info)
		}
	}
	if strings.Count(info, "suffrage=") != 3 {
		t.Errorf("shard 1's RAFT.INFO on n4, want 3 members:\n%s", info)
	}
	live := []*clusterProc{nodes[0], nodes[1], nodes[2], n4}
	for _, cp := range live {
		c := dial(t, cp.addr)
		testutil.WaitFor(t, 10*time.Second, cp.id+" to route by the map with shard 1 on n4, n1, n2", func() bool {
			m, err := cluster.DecodeShardMap(testutil.ParseReply(do(t, c, "RAFT.SHARD", "MAP")).Str)
			if err != nil {
				return false
			}
			sh, _ := m.Shard(1)
			return slices.Equal(sh.Members, []string{"n4", "n1", "n2"})
		})
		lines := strings.Split(strings.TrimSpace(testutil.ParseReply(do(t, c, "CLUSTER", "NODES")).Str), "\n")
		if len(lines) != 4 || strings.Contains(strings.Join(lines, "\n"), nodes[4].addr) || strings.Contains(strings.Join(lines, "\n"), nodes[5].addr) {
			t.Errorf("%s's CLUSTER NODES =\n%s\nwant the 4 live processes only", cp.id, strings.Join(lines, "\n"))
		}
	}
	for _, k := range keys {
		want := []string{"after"}
		if slices.Contains(written, k) {
			want = []string{"after", "before"}
		}
		if k == keys[5] {
			want = []string{"after", "during"}
		}
		got, err := rdb.SMembers(ctx, k).Result()
		slices.Sort(got)
		if k == k1 && slices.Equal(got, []string{"after", "x"}) {
			continue // the indeterminate write, kept
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SMEMBERS %s = %v, %v, want %v", k, got, err, want)
		}
	}
	t.Log(clusterCheck(t, n1.addr))
}

// TestShardedRecoverMetadataGroup: three processes hold both shards and
// the metadata group; n2 and n3 are killed for good, so every group lost
// its quorum. recover refuses n1's directory without a group named;
// `--shard 0,1 --meta` rewrites the three groups, and n1 restarted holds
// every acknowledged key, takes writes in every slot, and changes the map
// again: REMOVEREPLICA of the lost members of both shards, then a new
// process n4 added (`raftset cluster add-node`) given a replica of each
// shard, a voter of both, with redis-cli --cluster check OK.
func TestShardedRecoverMetadataGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 3, 2, 3)
	n1 := nodes[0]
	agreedMasters(t, nodes, "both shards to have a master on every node", func(m map[string]string) bool { return len(m) == 2 })
	ctx := context.Background()
	rdb := clusterClient(t, 10*time.Second, n1, nodes[1], nodes[2])
	keys := keyPerSlot()
	var written []string
	for s := 0; s < slot.Count; s += 64 {
		if err := rdb.SAdd(ctx, keys[s], "before").Err(); err != nil {
			t.Fatalf("SADD %s (slot %d): %v", keys[s], s, err)
		}
		written = append(written, keys[s])
	}
	c1 := dial(t, n1.addr)
	testutil.WaitFor(t, 30*time.Second, "n1 to hold every key", func() bool {
		return do(t, c1, "DBSIZE") == fmt.Sprintf(":%d\r\n", len(written))
	})
	nodes[1].p.kill9(t)
	nodes[2].p.kill9(t)
	n1.p.stop(t)

	var stdout, stderr strings.Builder
	want := "raftset recover: " + n1.dir + " is a sharded process's directory (shards 0, 1 and the metadata group): name the group that lost its quorum with --shard N or --meta\n"
	if code := run([]string{"recover", "--dir", n1.dir}, &stdout, &stderr); code != 1 || stderr.String() != want {
		t.Errorf("recover without a group: exit %d, %q, want %q", code, stderr.String(), want)
	}
	stderr.Reset()
	if code := run([]string{"recover", "--dir", n1.dir, "--shard", "0,1", "--meta"}, &stdout, &stderr); code != 0 {
		t.Fatalf("raftset recover --shard 0,1 --meta exited %d: %s", code, stderr.String())
	}
	raft1 := n1.extra[slices.Index(n1.extra, "--raft-addr")+1]
	for _, g := range []string{"shard 0", "shard 1", "metadata group"} {
		if want := "node n1, " + g + ": configuration is now n1=" + raft1 + " (voter) (every entry kept); "; !strings.Contains(stdout.String(), want) {
			t.Errorf("raftset recover printed %q, want %q", stdout.String(), want)
		}
	}
	n1.start(t)
	waitWritable(t, n1.addr)
	c1 = dial(t, n1.addr)
	for _, k := range written {
		if got, err := rdb.SMembers(ctx, k).Result(); err != nil || !slices.Equal(got, []string{"before"}) {
			t.Errorf("SMEMBERS %s (slot %d) after the recovery = %v, %v, want [before]", k, slot.Of([]byte(k)), got, err)
		}
	}
	pipe := rdb.Pipeline()
	for _, k := range keys {
		pipe.SAdd(ctx, k, "after")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Errorf("SADD in every slot after the recovery: %v", err)
	}
	for _, step := range [][]string{{"0", "n2"}, {"0", "n3"}, {"1", "n2"}, {"1", "n3"}} {
		if r := do(t, c1, "RAFT.SHARD", "REMOVEREPLICA", step[0], step[1]); r != "+OK\r\n" {
			t.Fatalf("RAFT.SHARD REMOVEREPLICA %s %s = %q", step[0], step[1], r)
		}
	}

	// n4: n1's directives, its own id and ports; added, then given a
	// replica of each shard.
	port, raftAddr := testutil.FreePort(t), fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	n4 := &clusterProc{id: "n4", dir: filepath.Join(t.TempDir(), "n4"), addr: fmt.Sprintf("127.0.0.1:%d", port)}
	for i := 0; i < len(n1.extra); i += 2 {
		switch v := n1.extra[i+1]; n1.extra[i] {
		case "--port":
			n4.extra = append(n4.extra, "--port", fmt.Sprint(port))
		case "--raft-addr":
			n4.extra = append(n4.extra, "--raft-addr", raftAddr)
		case "--node-id":
			n4.extra = append(n4.extra, "--node-id", "n4")
		default:
			n4.extra = append(n4.extra, n1.extra[i], v)
		}
	}
	n4.start(t)
	waitWritable(t, n4.addr)
	var out, errOut strings.Builder
	if code := run([]string{"cluster", "add-node", "--addr", n1.addr, "n4@" + n4.addr + "," + raftAddr}, &out, &errOut); code != 0 {
		t.Fatalf("add-node: exit %d, %q %s", code, out.String(), errOut.String())
	}
	for _, sh := range []string{"0", "1"} {
		if r := do(t, c1, "RAFT.SHARD", "ADDREPLICA", sh, "n4"); r != "+OK\r\n" {
			t.Fatalf("RAFT.SHARD ADDREPLICA %s n4 = %q", sh, r)
		}
		info := do(t, c1, "RAFT.SHARD", sh, "RAFT.INFO")
		if !strings.Contains(info, "id=n1,suffrage=voter") || !strings.Contains(info, "id=n4,suffrage=voter") || strings.Count(info, "suffrage=") != 2 {
			t.Errorf("shard %s's RAFT.INFO on n1, want voters n1 and n4:\n%s", sh, info)
		}
	}
	m, err := cluster.DecodeShardMap(testutil.ParseReply(do(t, c1, "RAFT.SHARD", "MAP")).Str)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{0, 1} {
		if sh, _ := m.Shard(id); !slices.Equal(sh.Members, []string{"n1", "n4"}) {
			t.Errorf("shard %d's members in the map = %v, want [n1 n4]", id, sh.Members)
		}
	}
	for _, k := range keys {
		want := []string{"after"}
		if slices.Contains(written, k) {
			want = []string{"after", "before"}
		}
		got, err := rdb.SMembers(ctx, k).Result()
		slices.Sort(got)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SMEMBERS %s = %v, %v, want %v", k, got, err, want)
		}
	}
	t.Log(clusterCheck(t, n4.addr))
}
