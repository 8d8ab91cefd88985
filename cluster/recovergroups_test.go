package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/fsm"
	"raftset/internal/testutil"
	"raftset/resp"
)

// restartableHost starts a Host behind a front end, as servedHosts does,
// and returns it with a stop that may be called before the test's end. Its
// client port is cfg.ClientAddr's if that is on 127.0.0.1, else a free one.
func restartableHost(t *testing.T, cfg Config, m *ShardMap) (*Host, func()) {
	t.Helper()
	addr := "127.0.0.1:0"
	if strings.HasPrefix(cfg.ClientAddr, "127.0.0.1:") {
		addr = cfg.ClientAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientAddr = ln.Addr().String()
	h, err := NewHost(cfg, m, newFSM)
	if err != nil {
		ln.Close()
		t.Fatalf("NewHost %s: %v", cfg.NodeID, err)
	}
	srv := resp.NewServer(resp.Config{Logger: cfg.Logger.Named("resp"), NodeSecret: NodeSecret("", "")}, hostRespStore{h})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Close()
			<-done
			if err := h.Close(); err != nil {
				t.Errorf("closing %s: %v", cfg.NodeID, err)
			}
		})
	}
	t.Cleanup(stop)
	return h, stop
}

// TestRecoverShardedProcess: three processes hold two shards and the
// metadata group; two are lost for good, so every group lost its quorum.
// The survivor, stopped, has each group's directory rewritten by Recover
// (shard 0 in dir, shard 1 in dir/shards/1, the metadata group in
// dir/meta), and started again it serves both shards with the keys it
// had, takes writes in both, and changes the map: REMOVEREPLICA of each
// lost member (in no Raft configuration any more, its process gone)
// succeeds where its majority rule would have refused the second.
func TestRecoverShardedProcess(t *testing.T) {
	m, err := ParseShardMap("0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3")
	if err != nil {
		t.Fatal(err)
	}
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
	}
	root := t.TempDir()
	cfgs := make([]Config, 3)
	hosts := make([]*Host, 3)
	stops := make([]func(), 3)
	for i, p := range peers {
		cfgs[i] = hostConfig(t, p.ID, filepath.Join(root, p.ID), p.Addr, peers)
		hosts[i], stops[i] = restartableHost(t, cfgs[i], m)
	}
	ctx := context.Background()
	k0, k1 := keyIn(t, "k", 0, 8191), keyIn(t, "k", 8192, 16383)
	n1 := hosts[0]
	for _, w := range []struct {
		shard uint32
		key   string
	}{{0, k0}, {1, k1}} {
		n, _ := n1.Node(w.shard)
		addRetry(t, n, w.key, "before")
		// Acknowledged means on a majority, which need not include n1:
		// the operator recovers the survivor that has every write.
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("n1's replica of shard %d to apply the write", w.shard), func() bool {
			return string(n.ReadBatch(ctx, [][][]byte{args("smembers", w.key)}, true)[0]) == "*1\r\n$6\r\nbefore\r\n"
		})
	}
	testutil.WaitFor(t, 10*time.Second, "every host to learn the map", func() bool {
		return hosts[1].Map().Epoch >= 1 && hosts[2].Map().Epoch >= 1
	})

	// A running process's groups are locked.
	if _, _, err := Recover(RecoverOptions{DataDir: ShardDir(cfgs[0].DataDir, 1), NodeID: "n1", FSM: fsm.New(fsm.Config{})}); err == nil ||
		!strings.Contains(err.Error(), "(stop the node first)") {
		t.Errorf("Recover of a running process's shard 1: %v, want it refused", err)
	}
	stops[1]()
	stops[2]()
	stops[0]()

	dir := cfgs[0].DataDir
	shards, meta, err := GroupsIn(dir)
	if err != nil || !slices.Equal(shards, []uint32{0, 1}) || !meta {
		t.Fatalf("GroupsIn(n1's dir) = %v, %v, %v, want [0 1], true", shards, meta, err)
	}
	for _, d := range []string{ShardDir(dir, 0), ShardDir(dir, 1), MetaDir(dir)} {
		before, after, err := Recover(RecoverOptions{DataDir: d, NodeID: "n1", FSM: fsm.New(fsm.Config{})})
		if err != nil {
			t.Fatalf("Recover %s: %v", d, err)
		}
		if want := "n1=" + peers[0].Addr + " (voter)"; after != want || !strings.Contains(before, "n3=") {
			t.Errorf("Recover %s: %q -> %q, want %q", d, before, after, want)
		}
	}

	n1, _ = restartableHost(t, cfgs[0], m)
	testutil.WaitFor(t, 30*time.Second, "the recovered n1 to learn the map", func() bool { return n1.Map().Epoch >= 1 })
	for _, w := range []struct {
		shard uint32
		key   string
	}{{0, k0}, {1, k1}} {
		n, _ := n1.Node(w.shard)
		addRetry(t, n, w.key, "after")
		if r := string(n.ReadBatch(ctx, [][][]byte{args("smismember", w.key, "before", "after")}, false)[0]); r != "*2\r\n:1\r\n:1\r\n" {
			t.Errorf("SMISMEMBER %s before after in the recovered shard %d = %q, want both", w.key, w.shard, r)
		}
	}
	// The map follows the groups: each lost member leaves it, the second
	// of a shard too (two of its three configured replicas are gone).
	epoch := n1.Map().Epoch
	for _, rm := range [][2]string{{"1", "n2"}, {"1", "n3"}, {"0", "n3"}, {"0", "n2"}} {
		if r := adminRetry(t, n1, "raft.shard", "removereplica", rm[0], rm[1]); r != "+OK\r\n" {
			t.Errorf("RAFT.SHARD REMOVEREPLICA %s %s = %q", rm[0], rm[1], r)
		}
	}
	want := fmt.Sprintf("epoch %d\nshard 0:0-8191:n1\nshard 1:8192-16383:n1\n", epoch+4)
	if got := n1.Map().Encode(); got != want {
		t.Errorf("map after removing the lost members =\n%s\nwant\n%s", got, want)
	}
	if r := adminRetry(t, n1, "raft.shard", "removereplica", "1", "n1"); r != "-ERR REMOVEREPLICA: shard 1 would keep 0 of its 3 configured replicas, less than a majority\r\n" {
		t.Errorf("RAFT.SHARD REMOVEREPLICA 1 n1 (the survivor) = %q", r)
	}

	// The metadata group has its one voter: it stays, a lost voter leaves
	// the map alone, and the group grows back with ADDMETA of a node whose
	// process runs again, here n2 on a new machine (an empty directory,
	// whose replica the directive makes bootstrap a group n1 does not
	// vote in: n1's configuration lacks it).
	if r := adminRetry(t, n1, "raft.shard", "removemeta", "n1"); r != "-ERR REMOVEMETA: node n1 is the metadata group's only voter: add another first (RAFT.SHARD ADDMETA)\r\n" {
		t.Errorf("RAFT.SHARD REMOVEMETA n1 (the only voter) = %q", r)
	}
	if r := adminRetry(t, n1, "raft.shard", "removemeta", "n3"); r != "+OK\r\n" {
		t.Errorf("RAFT.SHARD REMOVEMETA n3 (lost) = %q", r)
	}
	if got := n1.Map().Meta; !slices.Equal(got, []string{"n1"}) {
		t.Errorf("metadata voters after removing the lost n3 = %v, want [n1]", got)
	}
	cfg2 := cfgs[1]
	cfg2.DataDir = filepath.Join(root, "n2-new")
	n2, _ := restartableHost(t, cfg2, m)
	if r := adminRetry(t, n1, "raft.shard", "addmeta", "n2"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDMETA n2 (a new machine) = %q", r)
	}
	waitMetaState(t, []*Host{n1, n2}, []string{"n1", "n2"})
	testutil.WaitFor(t, 10*time.Second, "n2 to close the shard replicas its directive started", func() bool {
		return len(n2.held.Load().ids) == 0
	})
}
