package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/slot"
	"raftset/internal/testutil"
)

func TestParseShardMap(t *testing.T) {
	for _, tc := range []struct {
		in      string
		err     string // substring; "" for a valid map
		shards  int
		ownerOf map[int]uint32
	}{
		{in: "0:0-16383:n1", shards: 1, ownerOf: map[int]uint32{0: 0, 16383: 0}},
		{in: "0:0-5460:n1,n2,n3 1:5461-10922:n1,n2,n3;2:10923-16383:n2,n3,n1", shards: 3,
			ownerOf: map[int]uint32{5460: 0, 5461: 1, 10922: 1, 10923: 2}},
		{in: "7:0-99+200-16383:a 3:100-199:b", shards: 2, ownerOf: map[int]uint32{99: 7, 100: 3, 199: 3, 200: 7}},
		{in: "0:0-16382:n1 1:16383:n2", shards: 2, ownerOf: map[int]uint32{16383: 1}},
		{in: "", err: "no shards"},
		{in: "0:0-16382:n1", err: "slot 16383 belongs to no shard"},
		{in: "0:0-16383:n1 1:5:n1", err: "slot 5 belongs to two shards"},
		{in: "0:0-16383:n1 0:0-1:n1", err: "listed twice"},
		{in: "0:0-16384:n1", err: "bad slot range"},
		{in: "0:9-3:n1", err: "bad slot range"},
		{in: "x:0-16383:n1", err: "bad id"},
		{in: "0:0-16383", err: "want id:ranges:members"},
		{in: "0:0-16383:n1,n1", err: "repeated member"},
		{in: "0:0-8191:n1@10.0.0.1:6379,n2 1:8192-16383:n2@[::1]:6380,n1", shards: 2, ownerOf: map[int]uint32{8192: 1}},
		{in: "0:0-8191:n1@10.0.0.1:6379 1:8192-16383:n1@10.0.0.2:6379", err: "two client addresses"},
		{in: "0:0-16383:n1@nowhere", err: "client address"},
	} {
		m, err := ParseShardMap(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseShardMap(%q) = %v, want error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseShardMap(%q): %v", tc.in, err)
			continue
		}
		if len(m.Shards) != tc.shards || m.Epoch != 1 {
			t.Errorf("ParseShardMap(%q): %d shards, epoch %d", tc.in, len(m.Shards), m.Epoch)
		}
		for s, want := range tc.ownerOf {
			if got := m.ShardOf(s); got != want {
				t.Errorf("ParseShardMap(%q): slot %d in shard %d, want %d", tc.in, s, got, want)
			}
		}
	}
}

// keyIn returns a key whose slot is in [lo, hi].
func keyIn(t *testing.T, prefix string, lo, hi int) string {
	t.Helper()
	for i := range 100000 {
		k := fmt.Sprintf("%s%d", prefix, i)
		if s := slot.Of([]byte(k)); s >= lo && s <= hi {
			return k
		}
	}
	t.Fatalf("no key in slots %d-%d", lo, hi)
	return ""
}

func hostConfig(t *testing.T, id, dir, raftAddr string, peers []Peer) Config {
	cfg := fastConfig(t, id)
	cfg.InMemory = false
	cfg.DataDir = dir
	cfg.RaftBind = raftAddr
	cfg.Peers = peers
	cfg.ClientAddr = "client-" + id + ":6379" // published, never dialled here
	// Twice production's timers, as the several-moves tests found: with
	// 200/200/100 ms, a shard left with two voters by REMOVEREPLICA lost
	// its leader whenever a heartbeat took more than the 100 ms lease
	// (-race at load 15: 104-148 ms) and held none for 30 s, the driver's
	// limit (TestMoveReplica).
	patientTimers(&cfg)
	return cfg
}

func newFSM(shard uint32) *fsm.FSM { return fsm.New(fsm.Config{}) }

// TestHostsShareARaftPort runs three hosts of two shards each on the
// unauthenticated loopback port: each shard elects its own leader over the
// shared port, a write in each shard reaches that shard's replicas only,
// each host routes a slot to the leader of its shard, and shard 1 keeps its
// files under dir/shards/1.
func TestHostsShareARaftPort(t *testing.T) {
	m, err := ParseShardMap("0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3")
	if err != nil {
		t.Fatal(err)
	}
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
	}
	root := t.TempDir()
	var hosts []*Host
	for _, p := range peers {
		h, err := NewHost(hostConfig(t, p.ID, filepath.Join(root, p.ID), p.Addr, peers), m, newFSM)
		if err != nil {
			t.Fatalf("NewHost %s: %v", p.ID, err)
		}
		t.Cleanup(func() { h.Close() })
		hosts = append(hosts, h)
	}
	ctx := context.Background()
	leader := func(shard uint32) *Node {
		var l *Node
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("shard %d to elect a leader", shard), func() bool {
			for _, h := range hosts {
				if n, _ := h.Node(shard); n.IsLeader() {
					l = n
					return true
				}
			}
			return false
		})
		return l
	}
	k0, k1 := keyIn(t, "a", 0, 8191), keyIn(t, "b", 8192, 16383)
	for shard, key := range map[uint32]string{0: k0, 1: k1} {
		// Elections may still churn on a loaded machine: a write whose
		// leader lost leadership (-CLUSTERDOWN outcome unknown, -TRYAGAIN)
		// is sent again to the next leader, where SADD answers :0 if the
		// first one was applied after all.
		var r [][]byte
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("SADD %s in shard %d to commit", key, shard), func() bool {
			r = leader(shard).Write(ctx, []command.Op{cmd("sadd", key, "x")})
			return !bytes.HasPrefix(r[0], []byte("-CLUSTERDOWN")) && !bytes.HasPrefix(r[0], []byte("-TRYAGAIN"))
		})
		if got := string(r[0]); got != ":1\r\n" && got != ":0\r\n" {
			t.Fatalf("SADD %s in shard %d = %q", key, shard, got)
		}
	}
	for _, h := range hosts {
		for shard, key := range map[uint32]string{0: k0, 1: k1} {
			testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%s to see %s", h.self, key), func() bool {
				r := h.ReadBatch(ctx, [][][]byte{args("scard", key)}, true)
				return string(r[0]) == ":1\r\n"
			})
			other, _ := h.Node(1 - shard)
			if r := other.ReadBatch(ctx, [][][]byte{args("scard", key)}, true); string(r[0]) != ":0\r\n" {
				t.Errorf("%s: shard %d holds %s, a key of shard %d: %q", h.self, 1-shard, key, shard, r[0])
			}
			l := leader(shard)
			testutil.WaitFor(t, 10*time.Second, h.self+" to route "+key+" to the leader of its shard", func() bool {
				addr, here := h.RouteSlot(slot.Of([]byte(key)))
				if mine, _ := h.Node(shard); mine == l {
					return here
				}
				return !here && addr == "client-"+l.ID()+":6379"
			})
		}
		if _, err := os.Stat(filepath.Join(root, h.self, "shards", "1", "raft.db")); err != nil {
			t.Errorf("shard 1's store: %v", err)
		}
	}
	// CLUSTER SLOTS names both ranges, each with its shard's leader first.
	slots := string(hosts[0].Admin(ctx, args("cluster", "slots")))
	for _, want := range []string{"*2\r\n*5\r\n:0\r\n:8191\r\n", "*5\r\n:8192\r\n:16383\r\n"} {
		if !strings.Contains(slots, want) {
			t.Errorf("CLUSTER SLOTS = %q, want %q in it", slots, want)
		}
	}
}

// TestHostUpgradesASingleGroupDir starts a single-group node, then a host
// of two shards on the same directory: shard 0 is the old group, its data
// where it was; shard 1 starts empty under dir/shards/1.
func TestHostUpgradesASingleGroupDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	cfg := hostConfig(t, "n1", dir, addr, nil)
	k0, k1 := keyIn(t, "a", 0, 8191), keyIn(t, "b", 8192, 16383)
	n, err := New(cfg, fsm.New(fsm.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "leadership", n.IsLeader)
	for _, k := range []string{k0, k1} {
		if r := n.Write(ctx, []command.Op{cmd("sadd", k, "old")}); string(r[0]) != ":1\r\n" {
			t.Fatalf("SADD %s = %q", k, r[0])
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := ParseShardMap("0:0-8191:n1 1:8192-16383:n1")
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(cfg, m, newFSM)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if r := h.ReadBatch(ctx, [][][]byte{args("smembers", k0)}, false); string(r[0]) != "*1\r\n$3\r\nold\r\n" {
		t.Errorf("SMEMBERS %s after the upgrade = %q, want the old member", k0, r[0])
	}
	// k1's slot now belongs to shard 1, which starts empty: the old copy in
	// shard 0 is not served (moving it is the migration's job).
	if r := h.ReadBatch(ctx, [][][]byte{args("smembers", k1)}, false); string(r[0]) != "*0\r\n" {
		t.Errorf("SMEMBERS %s after the upgrade = %q, want empty", k1, r[0])
	}
	got := h.WriteIndexed
	replies, _ := got(ctx, []command.Op{cmd("sadd", k1, "new"), cmd("sadd", k0, "new"), cmd("sadd", k1, "x")})
	want := []string{":1\r\n", ":1\r\n", ":1\r\n"}
	for i := range replies {
		if string(replies[i]) != want[i] {
			t.Errorf("mixed-shard writes: reply %d = %q, want %q", i, replies[i], want[i])
		}
	}
	s1, _ := h.Node(1)
	if r := s1.ReadBatch(ctx, [][][]byte{args("scard", k1)}, false); string(r[0]) != ":2\r\n" {
		t.Errorf("SCARD %s in shard 1 = %q, want 2", k1, r[0])
	}
	// A transaction runs in its commands' shard; watching a key of another
	// shard would compare stamps of another state machine: CROSSSLOT.
	ws, bad := h.Watch(ctx, args(k1))
	if bad != nil {
		t.Fatalf("WATCH %s = %q", k1, bad)
	}
	tx := func(watch []command.Watch) command.Op {
		return command.Op{Kind: command.OpTx, Tx: &command.Tx{Watches: watch, Ops: []command.Op{cmd("sadd", k1, "tx")}}}
	}
	replies, _ = h.WriteIndexed(ctx, []command.Op{tx(ws), tx([]command.Watch{{Key: []byte(k0)}})})
	if string(replies[0]) != "*1\r\n:1\r\n" || string(replies[1]) != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
		t.Errorf("EXEC watching the same shard, another shard = %q", replies)
	}
	h.WriteIndexed(ctx, []command.Op{cmd("srem", k1, "tx")})
	// Keyless commands on the keyspace cover every shard hosted here.
	if r := h.ReadBatch(ctx, [][][]byte{args("dbsize"), args("scard", k1)}, false); string(r[0]) != ":3\r\n" || string(r[1]) != ":2\r\n" {
		t.Errorf("DBSIZE, SCARD = %q, want 3 keys (2 in shard 0, 1 in shard 1), 2", r)
	}
	var keyspace [][2]string
	for _, sec := range h.Info() {
		if sec.Name == "Keyspace" {
			keyspace = sec.Fields
		}
	}
	if len(keyspace) != 1 || keyspace[0] != [2]string{"db0", "keys=3,expires=0,avg_ttl=0"} {
		t.Errorf("INFO keyspace = %q, want the 3 keys of both shards", keyspace)
	}
	// RAFT.SHARD runs a node command on one shard's replica.
	for _, tc := range []struct{ cmd, want string }{
		{"raft.shard 1 lastsave", fmt.Sprintf(":%d\r\n", s1.lastSaveTime())},
		{"raft.shard 2 raft.info", "-ERR this node holds no replica of shard 2\r\n"},
		{"raft.shard 1 raft.shard 1 raft.info", "-ERR this node holds no replica of shard 1\r\n"},
		{"raft.shard x raft.info", "-ERR shard id is not an integer\r\n"},
	} {
		if r := string(h.Admin(ctx, args(strings.Fields(tc.cmd)...))); r != tc.want {
			t.Errorf("%s = %q, want %q", tc.cmd, r, tc.want)
		}
	}
	if r := string(h.Admin(ctx, args("raft.shard", "0", "raft.info"))); !strings.Contains(r, "shard") && !strings.Contains(r, "n1") {
		t.Errorf("RAFT.SHARD 0 RAFT.INFO = %q", r)
	}
	replies, _ = h.WriteIndexed(ctx, []command.Op{cmd("flushall")})
	if string(replies[0]) != "+OK\r\n" {
		t.Errorf("FLUSHALL = %q", replies[0])
	}
	if r := h.ReadBatch(ctx, [][][]byte{args("dbsize")}, false); string(r[0]) != ":0\r\n" {
		t.Errorf("DBSIZE after FLUSHALL = %q, want 0 in every shard", r[0])
	}
	// CONFIG SET reaches every shard's state machine.
	if r := string(h.Admin(ctx, args("config", "set", "set-max-intset-entries", "100"))); r != "+OK\r\n" {
		t.Errorf("CONFIG SET = %q", r)
	}
	for _, id := range []uint32{0, 1} {
		n, _ := h.Node(id)
		want := "*2\r\n$22\r\nset-max-intset-entries\r\n$3\r\n100\r\n"
		if r := string(n.Admin(ctx, args("config", "get", "set-max-intset-entries"))); r != want {
			t.Errorf("shard %d: CONFIG GET set-max-intset-entries = %q, want 100", id, r)
		}
	}
	// SAVE snapshots every shard.
	if r := string(h.Admin(ctx, args("save"))); r != "+OK\r\n" {
		t.Errorf("SAVE = %q", r)
	}
	for _, d := range []string{filepath.Join(dir, "snapshots"), filepath.Join(dir, "shards", "1", "snapshots")} {
		if ents, err := os.ReadDir(d); err != nil || len(ents) == 0 {
			t.Errorf("%s after SAVE: %d entries, %v", d, len(ents), err)
		}
	}
	// A restart finds each shard where it left it.
	replies, _ = h.WriteIndexed(ctx, []command.Op{cmd("sadd", k0, "again"), cmd("sadd", k1, "again")})
	if string(replies[0]) != ":1\r\n" || string(replies[1]) != ":1\r\n" {
		t.Fatalf("SADD after FLUSHALL = %q", replies)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if h, err = NewHost(cfg, m, newFSM); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for shard, k := range map[uint32]string{0: k0, 1: k1} {
		n, _ := h.Node(shard)
		if r := n.ReadBatch(ctx, [][][]byte{args("smembers", k)}, false); string(r[0]) != "*1\r\n$5\r\nagain\r\n" {
			t.Errorf("shard %d after a restart: SMEMBERS %s = %q", shard, k, r[0])
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "shards"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"1"}) {
		t.Errorf("dir/shards holds %v, want [1]", names)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); err != nil {
		t.Errorf("shard 0's store moved: %v", err)
	}
}

// TestHostWithoutAShard hosts one shard of two: the other shard's slots,
// whose members' client addresses this process never learnt, are not
// served here (CLUSTERDOWN, as Redis for an unserved slot) and CLUSTER
// reports them unassigned to a master.
func TestHostWithoutAShard(t *testing.T) {
	ctx := context.Background()
	peers := []Peer{{ID: "n1", Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}, {ID: "n2", Addr: "127.0.0.1:1"}}
	m, err := ParseShardMap("0:0-8191:n1 1:8192-16383:n2")
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(hostConfig(t, "n1", t.TempDir(), peers[0].Addr, peers), m, newFSM)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Node(1); ok {
		t.Fatal("n1 runs a replica of shard 1, which the map gives to n2")
	}
	k0, k1 := keyIn(t, "a", 0, 8191), keyIn(t, "b", 8192, 16383)
	replies, _ := h.WriteIndexed(ctx, []command.Op{cmd("sadd", k0, "x"), cmd("sadd", k1, "x")})
	if string(replies[0]) != ":1\r\n" || string(replies[1]) != "-CLUSTERDOWN Hash slot not served\r\n" {
		t.Errorf("SADD in shard 0, in shard 1 = %q", replies)
	}
	if r := h.ReadBatch(ctx, [][][]byte{args("scard", k1)}, true); string(r[0]) != "-CLUSTERDOWN Hash slot not served\r\n" {
		t.Errorf("SCARD in shard 1 = %q", r[0])
	}
	// A map that names n2's client address sends shard 1's slots there.
	m2, err := ParseShardMap("0:0-8191:n1 1:8192-16383:n2@10.9.8.7:6379")
	if err != nil {
		t.Fatal(err)
	}
	h2 := &Host{self: h.self}
	h2.home.Store(h.Home())
	h2.held.Store(h.held.Load())
	h2.smap.Store(m2)
	moved := fmt.Sprintf("-MOVED %d 10.9.8.7:6379\r\n", slot.Of([]byte(k1)))
	if r := h2.ReadBatch(ctx, [][][]byte{args("scard", k1)}, true); string(r[0]) != moved {
		t.Errorf("SCARD in shard 1 with n2's address in the map = %q, want %q", r[0], moved)
	}
	if addr, here := h2.RouteSlot(slot.Of([]byte(k1))); here || addr != "10.9.8.7:6379" {
		t.Errorf("RouteSlot in shard 1 = %q, %v", addr, here)
	}
	info := string(h.Admin(ctx, args("cluster", "info")))
	for _, want := range []string{"cluster_state:fail\r\n", "cluster_slots_assigned:16384\r\n", "cluster_slots_ok:8192\r\n",
		"cluster_slots_fail:8192\r\n", "cluster_known_nodes:2\r\n", "cluster_size:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLUSTER INFO = %q, want %q in it", info, want)
		}
	}
	if r := string(h.Admin(ctx, args("cluster", "slots"))); !strings.HasPrefix(r, "*1\r\n*3\r\n:0\r\n:8191\r\n") {
		t.Errorf("CLUSTER SLOTS = %q, want shard 0's range only", r)
	}
	if r := string(h.Admin(ctx, args("cluster", "countkeysinslot", fmt.Sprint(slot.Of([]byte(k1)))))); r != ":0\r\n" {
		t.Errorf("COUNTKEYSINSLOT of a slot served elsewhere = %q", r)
	}
}

// TestClusterNodesOfShards checks the per-process CLUSTER NODES lines for
// shards led by different processes: a process leading two shards is one
// master of both shards' slots (adjacent ranges joined), one leading none
// a replica of the first shard's master, and every process is listed once.
func TestClusterNodesOfShards(t *testing.T) {
	member := func(id string, master, self bool) clusterMember {
		return clusterMember{id: ClusterNodeID(id), host: "127.0.0.1", port: "700" + id[1:], busPort: "1700" + id[1:], master: master, self: self}
	}
	views := []shardView{
		{ranges: [][2]int{{0, 99}}, hasMaster: true, term: 3,
			members: []clusterMember{member("n1", true, false), member("n2", false, true), member("n3", false, false)}},
		{ranges: [][2]int{{100, 199}, {300, 16383}}, hasMaster: true, term: 5,
			members: []clusterMember{member("n1", true, false), member("n2", false, true), member("n3", false, false)}},
		{ranges: [][2]int{{200, 299}}, hasMaster: true, term: 2,
			members: []clusterMember{member("n3", true, false), member("n1", false, false), member("n2", false, true)}},
	}
	id1, id2, id3 := ClusterNodeID("n1"), ClusterNodeID("n2"), ClusterNodeID("n3")
	want := id1 + " 127.0.0.1:7001@17001 master - 0 0 5 connected 0-199 300-16383\n" +
		id2 + " 127.0.0.1:7002@17002 myself,slave " + id1 + " 0 0 5 connected\n" +
		id3 + " 127.0.0.1:7003@17003 master - 0 0 5 connected 200-299\n"
	if got := string(clusterNodes(views, 0)); got != string(command.AppendBulkString(nil, want)) {
		t.Errorf("CLUSTER NODES =\n%s\nwant\n%s", got, want)
	}
	info := string(clusterInfo(views, 0))
	for _, f := range []string{"cluster_state:ok\r\n", "cluster_known_nodes:3\r\n", "cluster_size:2\r\n", "cluster_current_epoch:5\r\n"} {
		if !strings.Contains(info, f) {
			t.Errorf("CLUSTER INFO = %q, want %q in it", info, f)
		}
	}
}
