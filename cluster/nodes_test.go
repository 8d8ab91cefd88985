package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
	"raftset/internal/slot"
	"raftset/internal/testutil"
	"raftset/resp"
)

// TestNodeRecordsEncode: node records survive the metadata group's
// encoding, a map without them encodes byte for byte as before (so maps
// written before node records existed decode and compare-and-set as they
// did), and a bad record is refused.
func TestNodeRecordsEncode(t *testing.T) {
	const old = "epoch 4\nshard 0:0-8191:n1,n2,n3\nshard 1:8192-16383:n2,n3,n1\nadded 1 n1\n"
	for _, tc := range []struct {
		name  string
		enc   string
		nodes map[string]NodeRecord
	}{
		{"without records", old, nil},
		{"with records", "epoch 4\nshard 0:0-8191:n1,n2,n3\nshard 1:8192-16383:n2,n3,n1\n" +
			"node n4 127.0.0.1:7004 127.0.0.1:17004\nnode n5 [::1]:7005 10.0.0.5:9000\nadded 1 n1\n",
			map[string]NodeRecord{"n4": {"127.0.0.1:7004", "127.0.0.1:17004"}, "n5": {"[::1]:7005", "10.0.0.5:9000"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeShardMap(tc.enc)
			if err != nil {
				t.Fatalf("DecodeShardMap(%q): %v", tc.enc, err)
			}
			if len(m.Nodes) != len(tc.nodes) {
				t.Errorf("Nodes = %v, want %v", m.Nodes, tc.nodes)
			}
			for id, want := range tc.nodes {
				if got := m.Nodes[id]; got != want {
					t.Errorf("Nodes[%s] = %v, want %v", id, got, want)
				}
			}
			if got := m.Encode(); got != tc.enc {
				t.Errorf("Encode() = %q, want %q", got, tc.enc)
			}
			if got := m.clone().Encode(); got != tc.enc {
				t.Errorf("clone().Encode() = %q, want %q", got, tc.enc)
			}
		})
	}

	// Built in code, as ADDNODE does: the records come out sorted by id.
	m, err := DecodeShardMap(old)
	if err != nil {
		t.Fatal(err)
	}
	next := m.clone()
	next.Nodes = map[string]NodeRecord{"n9": {"h9:1", "h9:2"}, "n10": {"h10:1", "h10:2"}}
	if got, want := next.Encode(), "epoch 4\nshard 0:0-8191:n1,n2,n3\nshard 1:8192-16383:n2,n3,n1\nnode n10 h10:1 h10:2\nnode n9 h9:1 h9:2\nadded 1 n1\n"; got != want {
		t.Errorf("Encode() = %q, want %q", got, want)
	}
	if m.Encode() != old || m.Nodes != nil {
		t.Errorf("the clone's records reached the original: %q", m.Encode())
	}

	for _, bad := range []string{
		"node n4 127.0.0.1:7004",
		"node n4 127.0.0.1:7004 127.0.0.1:17004 x",
		"node n4 127.0.0.1 127.0.0.1:17004",
		"node n4 127.0.0.1:7004 nohost",
		"node n,4 127.0.0.1:7004 127.0.0.1:17004",
	} {
		enc := "epoch 2\nshard 0:0-16383:n1\n" + bad + "\n"
		if _, err := DecodeShardMap(enc); err == nil || !strings.Contains(err.Error(), "bad node line") {
			t.Errorf("DecodeShardMap(%q) = %v, want a bad node line", enc, err)
		}
	}
}

// TestAddNode records a node with RAFT.SHARD ADDNODE sent to each kind of
// process (the metadata leader's, a voter that relays it): every process
// learns its addresses from the map (after peers), a repeat of the same
// record is +OK and changes nothing, and a taken id or address, a bad
// address or id and a wrong arity are refused byte for byte.
func TestAddNode(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3", 3)
	n1, n2 := hosts[0], hosts[1]
	n1Client := n1.cfg.ClientAddr
	n2Raft := n2.cfg.RaftBind
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"addnode", "n2", "10.0.0.9:7009", "10.0.0.9:17009"}, "-ERR ADDNODE: node n2 already exists\r\n"},
		{[]string{"addnode", "n9", n1Client, "10.0.0.9:17009"}, "-ERR ADDNODE: client address " + n1Client + " is node n1's\r\n"},
		{[]string{"addnode", "n9", "10.0.0.9:7009", n2Raft}, "-ERR ADDNODE: Raft address " + n2Raft + " is node n2's\r\n"},
		{[]string{"addnode", "n9", "10.0.0.9", "10.0.0.9:17009"}, "-ERR ADDNODE: client address \"10.0.0.9\" is not host:port\r\n"},
		{[]string{"addnode", "n9", "10.0.0.9:7009", "x"}, "-ERR ADDNODE: Raft address \"x\" is not host:port\r\n"},
		{[]string{"addnode", "n@9", "10.0.0.9:7009", "10.0.0.9:17009"}, "-ERR ADDNODE: bad node id \"n@9\"\r\n"},
		{[]string{"addnode", "n9", "10.0.0.9:7009"}, "-ERR wrong number of arguments for 'raft.shard|addnode' command\r\n"},
	} {
		for _, h := range hosts {
			if r := adminRetry(t, h, append([]string{"raft.shard"}, tc.args...)...); r != tc.want {
				t.Errorf("RAFT.SHARD %s on %s = %q, want %q", strings.Join(tc.args, " "), h.self, r, tc.want)
			}
		}
	}

	epoch := n2.Map().Epoch
	for _, h := range []*Host{n2, n1, n2} { // the second and third are repeats
		if r := adminRetry(t, h, "raft.shard", "addnode", "n4", "10.0.0.4:7004", "10.0.0.4:17004"); r != "+OK\r\n" {
			t.Fatalf("RAFT.SHARD ADDNODE n4 on %s = %q", h.self, r)
		}
	}
	for _, h := range hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn n4's record", func() bool {
			_, ok := h.Map().Nodes["n4"]
			return ok
		})
		if m := h.Map(); m.Epoch != epoch+1 {
			t.Errorf("%s: map epoch %d after ADDNODE and two repeats, want %d", h.self, m.Epoch, epoch+1)
		}
		if a, ok := h.raftAddrOf("n4"); !ok || a != "10.0.0.4:17004" {
			t.Errorf("%s: n4's Raft address = %q, %v", h.self, a, ok)
		}
		if a := h.clientAddr("n4"); a != "10.0.0.4:7004" {
			t.Errorf("%s: n4's client address = %q", h.self, a)
		}
		if a, _ := h.raftAddrOf("n1"); a != n1.cfg.RaftBind {
			t.Errorf("%s: n1's Raft address = %q, want peers' %q", h.self, a, n1.cfg.RaftBind)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"addnode", "n4", "10.0.0.4:7004", "10.0.0.4:17005"}, "-ERR ADDNODE: node n4 already exists\r\n"},
		{[]string{"addnode", "n5", "10.0.0.4:7004", "10.0.0.5:17005"}, "-ERR ADDNODE: client address 10.0.0.4:7004 is node n4's\r\n"},
		{[]string{"addnode", "n5", "10.0.0.5:7005", "10.0.0.4:17004"}, "-ERR ADDNODE: Raft address 10.0.0.4:17004 is node n4's\r\n"},
	} {
		if r := adminRetry(t, n2, append([]string{"raft.shard"}, tc.args...)...); r != tc.want {
			t.Errorf("RAFT.SHARD %s = %q, want %q", strings.Join(tc.args, " "), r, tc.want)
		}
	}
}

// TestNodeWithoutReplica starts n4 with the cluster's shard-map directive
// (the voters' client addresses in it) and peers that do not name it:
// holding no replica, it learns the replicated map from the voters,
// redirects keyed commands to their shard's leader, refuses keyless ones,
// counts no key. Once ADDNODE recorded it and ADDREPLICA (sent to n4
// itself, relayed to the metadata leader's process) gave it shard 1, its
// replica joins as a voter with the shard's data, and becomes its home.
func TestNodeWithoutReplica(t *testing.T) {
	ctx := context.Background()
	ids := []string{"n1", "n2", "n3", "n4"}
	lns := map[string]net.Listener{}
	raftAddrs := map[string]string{}
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		raftAddrs[id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	}
	m, err := ParseShardMap(fmt.Sprintf("0:0-8191:n1@%s,n2@%s,n3@%s 1:8192-16383:n1,n2,n3",
		lns["n1"].Addr(), lns["n2"].Addr(), lns["n3"].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	var peers []Peer
	for _, id := range ids[:3] {
		peers = append(peers, Peer{ID: id, Addr: raftAddrs[id]})
	}
	root := t.TempDir()
	hosts := map[string]*Host{}
	for _, id := range ids {
		cfg := hostConfig(t, id, filepath.Join(root, id), raftAddrs[id], peers)
		cfg.ClientAddr = lns[id].Addr().String()
		h, err := NewHost(cfg, m, newFSM)
		if err != nil {
			lns[id].Close()
			t.Fatalf("NewHost %s: %v", id, err)
		}
		srv := resp.NewServer(resp.Config{Logger: cfg.Logger.Named("resp"), NodeSecret: NodeSecret("", "")}, hostRespStore{h})
		done := make(chan struct{})
		go func(ln net.Listener) { defer close(done); srv.Serve(ln) }(lns[id])
		t.Cleanup(func() {
			srv.Close()
			<-done
			h.Close()
		})
		hosts[id] = h
	}
	n4 := hosts["n4"]
	if n4.Home() != nil || n4.MetaNode() != nil {
		t.Fatalf("n4 started with a home shard %v or a metadata voter", n4.Home())
	}
	testutil.WaitFor(t, 30*time.Second, "n4 to learn the replicated map from the voters", func() bool { return n4.Map().Epoch >= 1 })
	k1 := keyIn(t, "k", 8192, 16383)
	shard1, _ := hosts["n1"].Node(1)
	if r := writeRetry(t, shard1, "sadd", k1, "before"); r != ":1\r\n" {
		t.Fatalf("SADD in shard 1 = %q", r)
	}
	movedPrefix := fmt.Sprintf("-MOVED %d 127.0.0.1:", slot.Of([]byte(k1)))
	testutil.WaitFor(t, 10*time.Second, "n4 to redirect shard 1's key to its leader", func() bool {
		r, _ := n4.WriteIndexed(ctx, []command.Op{cmd("sadd", k1, "x")})
		return strings.HasPrefix(string(r[0]), movedPrefix)
	})
	refused := "-TRYAGAIN this node holds no replica yet: keyless commands run once it holds one (RAFT.SHARD ADDREPLICA, raftset cluster rebalance --replicas)\r\n"
	for _, c := range [][]string{{"keys", "*"}, {"flushall"}} {
		var r []byte
		if c[0] == "flushall" {
			rs, _ := n4.WriteIndexed(ctx, []command.Op{cmd(c...)})
			r = rs[0]
		} else {
			r = n4.ReadBatch(ctx, [][][]byte{args(c...)}, false)[0]
		}
		if string(r) != refused {
			t.Errorf("%s on n4 = %q, want %q", strings.Join(c, " "), r, refused)
		}
	}
	for _, c := range [][]string{{"raft.info"}, {"config", "set", "set-max-intset-entries", "10"}} {
		if r := string(n4.Admin(ctx, args(c...))); r != refused {
			t.Errorf("%s on n4 = %q, want %q", strings.Join(c, " "), r, refused)
		}
	}
	if r := string(n4.Wait(ctx, args("wait", "1", "0"), 0)); r != refused {
		t.Errorf("WAIT 1 0 on n4 = %q, want %q", r, refused)
	}
	if r := string(n4.ReadBatch(ctx, [][][]byte{args("dbsize")}, false)[0]); r != ":0\r\n" {
		t.Errorf("DBSIZE on n4 = %q, want :0", r)
	}
	// Shard 1's range shows once n4 learnt its leader from its members.
	testutil.WaitFor(t, 10*time.Second, "CLUSTER SLOTS on n4 to list both shards' ranges", func() bool {
		return strings.HasPrefix(string(n4.Admin(ctx, args("cluster", "slots"))), "*2\r\n")
	})
	// n4 lists itself as Redis lists a node just added: a master of no
	// slot; the others do not list it before ADDNODE.
	self := fmt.Sprintf("%s %s@%s myself,master - 0 0 ", ClusterNodeID("n4"), n4.cfg.ClientAddr, strings.Split(n4.cfg.RaftBind, ":")[1])
	nodesOf := func(h *Host) []string {
		v, err := respwire.Parse(h.Admin(ctx, args("cluster", "nodes")))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(v.Str, "\n"), "\n")
	}
	if lines := nodesOf(n4); len(lines) != 4 || !slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, self) && strings.HasSuffix(l, " connected")
	}) {
		t.Errorf("CLUSTER NODES on n4 =\n%s\nwant 4 lines, one %q... with no slot", strings.Join(lines, "\n"), self)
	}
	if lines := nodesOf(hosts["n1"]); len(lines) != 3 {
		t.Errorf("CLUSTER NODES on n1 before ADDNODE =\n%s\nwant 3 lines", strings.Join(lines, "\n"))
	}
	if r := string(n4.Admin(ctx, args("cluster", "info"))); !strings.Contains(r, "cluster_known_nodes:4\r\n") {
		t.Errorf("CLUSTER INFO on n4 = %q, want 4 known nodes", r)
	}

	want := "-ERR ADDREPLICA: unknown node \"n4\" (not in peers, nor added by RAFT.SHARD ADDNODE)\r\n"
	if r := adminRetry(t, n4, "raft.shard", "addreplica", "1", "n4"); r != want {
		t.Errorf("ADDREPLICA before ADDNODE = %q, want %q", r, want)
	}
	if r := adminRetry(t, n4, "raft.shard", "addnode", "n4", n4.cfg.ClientAddr, n4.cfg.RaftBind); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDNODE n4 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n1 to list n4 in CLUSTER NODES, a master of no slot", func() bool {
		return slices.ContainsFunc(nodesOf(hosts["n1"]), func(l string) bool {
			return strings.HasPrefix(l, strings.Replace(self, "myself,", "", 1)) && strings.HasSuffix(l, " connected")
		})
	})
	if r := adminRetry(t, n4, "raft.shard", "addreplica", "1", "n4"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDREPLICA 1 n4 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n4 to run a replica of shard 1", func() bool { _, ok := n4.Node(1); return ok })
	rep, _ := n4.Node(1)
	if n4.Home() != rep {
		t.Errorf("n4's home is %v, want its replica of shard 1", n4.Home())
	}
	// ADDREPLICA answered once the leader's configuration made n4 a
	// voter; n4's own copy of it follows.
	testutil.WaitFor(t, 10*time.Second, "n4 to see itself a voter of shard 1", func() bool {
		s, ok := rep.selfServer()
		return ok && s.Suffrage.String() == "Voter"
	})
	testutil.WaitFor(t, 10*time.Second, "n4's replica to hold the key written before it joined", func() bool {
		return string(rep.ReadBatch(ctx, [][][]byte{args("smembers", k1)}, true)[0]) == "*1\r\n$6\r\nbefore\r\n"
	})
	if r := string(n4.ReadBatch(ctx, [][][]byte{args("dbsize")}, true)[0]); r != ":1\r\n" {
		t.Errorf("DBSIZE on n4 with shard 1 = %q, want :1", r)
	}
	for _, h := range hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to list n4 in shard 1", func() bool {
			sh, _ := h.Map().Shard(1)
			return strings.Join(sh.Members, ",") == "n1,n2,n3,n4"
		})
	}

	// Shard 0 added later, a lower id, does not become n4's home: the map
	// records the home (a home line, as n4's lowest id is not it), so
	// shard 1 cannot be removed from it while it holds another.
	if r := adminRetry(t, hosts["n2"], "raft.shard", "addreplica", "0", "n4"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDREPLICA 0 n4 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n4 to run a replica of shard 0", func() bool { _, ok := n4.Node(0); return ok })
	if n4.Home() != rep {
		t.Errorf("n4's home after ADDREPLICA 0 n4 is %v, want its replica of shard 1", n4.Home())
	}
	for _, h := range hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn n4's home", func() bool {
			home, ok := h.Map().Home("n4")
			return ok && home == 1 && h.Map().Homes["n4"] == 1
		})
	}
	want = "-ERR REMOVEREPLICA: shard 1 is node n4's home shard; it goes last, once the node holds no other replica (raftset cluster remove-node)\r\n"
	if r := adminRetry(t, hosts["n2"], "raft.shard", "removereplica", "1", "n4"); r != want {
		t.Errorf("REMOVEREPLICA 1 n4 (its home) = %q, want %q", r, want)
	}
	if r := adminRetry(t, hosts["n2"], "raft.shard", "removereplica", "0", "n4"); r != "+OK\r\n" {
		t.Errorf("REMOVEREPLICA 0 n4 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n4 to close its replica of shard 0", func() bool { _, ok := n4.Node(0); return !ok })
	if _, ok := n4.Node(1); !ok || n4.Home() != rep {
		t.Errorf("n4 lost its home replica of shard 1")
	}
	// Its only shard again, and its lowest: the map needs no home line.
	if m := n4.Map(); m.Homes != nil {
		t.Errorf("home lines %v once n4's home is its lowest id again", m.Homes)
	}
}
