package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/command"
	"raftset/internal/slot"
	"raftset/internal/testutil"
	"raftset/resp"
)

type hostRespStore struct{ *Host }

func (s hostRespStore) Info() []resp.InfoSection {
	in := s.Host.Info()
	out := make([]resp.InfoSection, len(in))
	for i, sec := range in {
		out[i] = resp.InfoSection{Name: sec.Name, Fields: sec.Fields}
	}
	return out
}

// servedHosts starts one Host per member of the map's first shard, each
// behind a front end on a real client port (the driver and the relays call
// each other there), on the shared loopback Raft port.
func servedHosts(t *testing.T, shardMap string, size int) []*Host {
	t.Helper()
	return servedHostsWith(t, shardMap, size, nil)
}

// servedHostsWith is servedHosts with tweak applied to each host's
// configuration.
func servedHostsWith(t *testing.T, shardMap string, size int, tweak func(*Config)) []*Host {
	t.Helper()
	m, err := ParseShardMap(shardMap)
	if err != nil {
		t.Fatal(err)
	}
	var peers []Peer
	for i := range size {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
	}
	root := t.TempDir()
	var hosts []*Host
	for _, p := range peers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := hostConfig(t, p.ID, filepath.Join(root, p.ID), p.Addr, peers)
		cfg.ClientAddr = ln.Addr().String()
		if tweak != nil {
			tweak(&cfg)
		}
		h, err := NewHost(cfg, m, newFSM)
		if err != nil {
			ln.Close()
			t.Fatalf("NewHost %s: %v", p.ID, err)
		}
		srv := resp.NewServer(resp.Config{Logger: cfg.Logger.Named("resp"), NodeSecret: NodeSecret("", "")}, hostRespStore{h})
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(ln) }()
		t.Cleanup(func() {
			srv.Close()
			<-done
			h.Close()
		})
		hosts = append(hosts, h)
	}
	for _, h := range hosts {
		testutil.WaitFor(t, 30*time.Second, h.self+" to learn the replicated map", func() bool { return h.Map().Epoch >= 1 })
	}
	return hosts
}

// TestMoveSlotsUnderWrites moves a range of slots from shard 0 to shard 1
// with RAFT.SHARD MOVESLOTS while clients write to it, then back, and again,
// each time with the driver failing once half way (before the copy; after
// the flip) and the same command run again to complete the move. n4 holds
// only shard 1, so it is outside the metadata group: the first move is
// sent to it (relayed to the metadata leader's process), and it learns
// each map from the voters. Every acknowledged member is in its set
// afterwards, each key lives in exactly one shard on every replica, and
// every host routes the range by the newest map.
func TestMoveSlotsUnderWrites(t *testing.T) {
	all := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3,n4", 4)
	hosts, outsider := all[:3], all[3]
	if outsider.MetaNode() != nil {
		t.Fatal("n4 runs a metadata voter")
	}
	ctx := context.Background()
	const first, last = 1000, 1031
	ws := startSlotWriters(t, hosts, first, last)
	moveWithFault := func(driver *Host, to uint32, step string) {
		t.Helper()
		var once atomic.Bool
		f := func(s string, _ SlotMove) error {
			if s == step && once.CompareAndSwap(false, true) {
				return errors.New("injected failure before " + s)
			}
			return nil
		}
		for _, h := range all {
			h.moveFault.Store(&f)
		}
		args := args("raft.shard", "moveslots", fmt.Sprint(first), fmt.Sprint(last), fmt.Sprint(to))
		// As a client would, retry while the metadata group has no
		// reachable leader (an election under load).
		run := func() string {
			var r string
			testutil.WaitFor(t, 20*time.Second, "MOVESLOTS to reach the metadata leader", func() bool {
				r = string(driver.Admin(ctx, args))
				return !strings.HasPrefix(r, "-TRYAGAIN")
			})
			return r
		}
		if r := run(); !strings.Contains(r, "injected failure before "+step) {
			t.Fatalf("MOVESLOTS with a failure before %s = %q", step, r)
		}
		testutil.WaitFor(t, 30*time.Second, "the interrupted move to show in every map", func() bool {
			for _, h := range all {
				if len(h.Map().Moves) == 0 {
					return false
				}
			}
			return true
		})
		if r := run(); r != "+OK\r\n" {
			t.Fatalf("MOVESLOTS run again = %q", r)
		}
		testutil.WaitFor(t, 30*time.Second, "every host to route by the new map", func() bool {
			for _, h := range all {
				m := h.Map()
				if len(m.Moves) > 0 || m.ShardOf(first) != to || m.ShardOf(last) != to || m.ShardOf(first-1) != 0 {
					return false
				}
			}
			return true
		})
		ws.waitWrites(t, 50)
	}
	ws.waitWrites(t, 100)
	epoch0 := hosts[0].Map().Epoch
	moveWithFault(outsider, 1, "copy")
	if e := hosts[0].Map().Epoch; e != epoch0+3 {
		t.Errorf("epoch after a move = %d, want %d (plan, flip, stable)", e, epoch0+3)
	}
	moveWithFault(hosts[1], 0, "drop")
	moveWithFault(hosts[2], 1, "drop")
	ws.stopAndCheck(t, hosts, func(s int) uint32 {
		if s >= first && s <= last {
			return 1
		}
		return 0
	})
	for _, h := range hosts {
		m := h.Map()
		if r := string(h.Admin(ctx, args("raft.shard", "map"))); r != string(command.AppendBulkString(nil, m.Encode())) ||
			!strings.Contains(r, fmt.Sprintf("shard 1:%d-%d+8192-16383:", first, last)) || strings.Contains(r, "move ") {
			t.Errorf("%s: RAFT.SHARD MAP = %q", h.self, r)
		}
		if r := string(h.Admin(ctx, args("raft.shard", "moveslots", "5", "1", "1"))); !strings.HasPrefix(r, "-ERR MOVESLOTS wants") {
			t.Errorf("%s: MOVESLOTS 5 1 1 = %q", h.self, r)
		}
		// cluster_state is ok while every shard has a known leader: an
		// election of the loaded machine's passes.
		var info string
		if !testutil.Within(30*time.Second, func() bool {
			info = string(h.Admin(ctx, args("cluster", "info")))
			return strings.Contains(info, "cluster_state:ok")
		}) {
			t.Errorf("%s: CLUSTER INFO = %q", h.self, info)
		}
		slots := string(h.Admin(ctx, args("cluster", "slots")))
		for _, want := range []string{fmt.Sprintf(":%d\r\n:%d\r\n", first, last), fmt.Sprintf(":0\r\n:%d\r\n", first-1)} {
			if !strings.Contains(slots, want) {
				t.Errorf("%s: CLUSTER SLOTS = %q, want the range %q", h.self, slots, want)
			}
		}
	}
	if a, b := string(outsider.Admin(ctx, args("raft.shard", "map"))), string(hosts[0].Admin(ctx, args("raft.shard", "map"))); a != b {
		t.Errorf("n4's map %q, n1's %q", a, b)
	}
	if r := string(outsider.Admin(ctx, args("cluster", "slots"))); !strings.Contains(r, fmt.Sprintf(":%d\r\n:%d\r\n", first, last)) {
		t.Errorf("n4: CLUSTER SLOTS = %q", r)
	}
	if r, _ := outsider.WriteIndexed(ctx, []command.Op{cmd("sadd", ws.outside, "n4")}); !strings.HasPrefix(string(r[0]), "-MOVED "+fmt.Sprint(slot.Of([]byte(ws.outside)))) {
		t.Errorf("n4: SADD to shard 0 = %q, want MOVED", r[0])
	}
	// A voter that does not lead refuses a relayed MOVESLOTS rather than
	// relaying it again (two voters with stale views cannot bounce it).
	for _, h := range hosts {
		if h.MetaNode().IsLeader() {
			continue
		}
		r := string(h.Internal(ctx, args(cmdShard, fmt.Sprint(MetaGroup), cmdMoveSlots, "0", "1", "1", "relayed")))
		if !strings.HasPrefix(r, "-TRYAGAIN MOVESLOTS was not run: this node no longer leads the metadata group") {
			t.Errorf("%s: relayed MOVESLOTS on a follower = %q", h.self, r)
		}
	}
}

// TestShardMapEncoding round-trips maps as the metadata group stores them.
func TestShardMapEncoding(t *testing.T) {
	m, err := ParseShardMap("0:0-8191:n1@10.0.0.1:6379,n2 1:8192-16383:n2@10.0.0.2:6379,n1")
	if err != nil {
		t.Fatal(err)
	}
	moved := m.withOwner(100, 199, 1)
	moved.Epoch = 7
	moved.Moves = []SlotMove{{First: 100, Last: 199, From: 0, To: 1, Epoch: 6, Flip: 7}}
	aborting := m.clone()
	aborting.Epoch = 9
	aborting.Moves = []SlotMove{{First: 100, Last: 199, From: 0, To: 1, Epoch: 8, Abort: 9}}
	for _, tc := range []struct {
		m    *ShardMap
		want string
	}{
		{m, "epoch 1\nshard 0:0-8191:n1@10.0.0.1:6379,n2@10.0.0.2:6379\nshard 1:8192-16383:n2@10.0.0.2:6379,n1@10.0.0.1:6379\n"},
		{moved, "epoch 7\nshard 0:0-99+200-8191:n1@10.0.0.1:6379,n2@10.0.0.2:6379\nshard 1:100-199+8192-16383:n2@10.0.0.2:6379,n1@10.0.0.1:6379\nmove 100-199 0 1 6 7\n"},
		{aborting, "epoch 9\nshard 0:0-8191:n1@10.0.0.1:6379,n2@10.0.0.2:6379\nshard 1:8192-16383:n2@10.0.0.2:6379,n1@10.0.0.1:6379\nmove 100-199 0 1 8 0 9\n"},
	} {
		enc := tc.m.Encode()
		if enc != tc.want {
			t.Errorf("Encode = %q, want %q", enc, tc.want)
		}
		back, err := DecodeShardMap(enc)
		if err != nil {
			t.Fatalf("DecodeShardMap(%q): %v", enc, err)
		}
		if back.Encode() != enc || back.ShardOf(150) != tc.m.ShardOf(150) || back.ShardOf(99) != 0 {
			t.Errorf("DecodeShardMap(%q) = %q", enc, back.Encode())
		}
	}
	for _, bad := range []string{"", "epoch x\nshard 0:0-16383:n1", "shard 0:0-16383:n1", "epoch 1\nshard 0:0-16383:n1\nmove 1-2", "epoch 1\nshard 0:0-16383:n1\nmove 1-2 0 1 3 0 4 5", "epoch 1\nnope"} {
		if _, err := DecodeShardMap(bad); err == nil {
			t.Errorf("DecodeShardMap(%q) accepted", bad)
		}
	}
	if _, err := ParseShardMap(fmt.Sprintf("%d:0-16383:n1", MetaGroup)); err == nil {
		t.Errorf("a shard with the metadata group's id was accepted")
	}
}

// lockedBuffer is a log sink the test reads while the host writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReplicatedMapWinsOnRestart moves slots on a one-process cluster,
// snapshots the metadata group, and restarts the process with another
// shard-map: the replicated map (restored from the snapshot) routes, and
// the changed directive is only warned about.
func TestReplicatedMapWinsOnRestart(t *testing.T) {
	ctx := context.Background()
	peers := []Peer{{ID: "n1", Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}}
	dir := t.TempDir()
	start := func(shardMap string, log *lockedBuffer) *Host {
		t.Helper()
		m, err := ParseShardMap(shardMap)
		if err != nil {
			t.Fatal(err)
		}
		cfg := hostConfig(t, "n1", dir, peers[0].Addr, peers)
		if log != nil {
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Info})
		}
		h, err := NewHost(cfg, m, newFSM)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := start("0:0-8191:n1 1:8192-16383:n1", nil)
	testutil.WaitFor(t, 20*time.Second, "the map to be bootstrapped", func() bool { return h.Map().Epoch == 1 })
	// The map's group can lead before the shards' (1 s timers).
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	k := keyIn(t, "r", 0, 99)
	if r, _ := h.WriteIndexed(ctx, []command.Op{cmd("sadd", k, "a")}); string(r[0]) != ":1\r\n" {
		t.Fatalf("SADD = %q", r[0])
	}
	if r := string(h.Admin(ctx, args("raft.shard", "moveslots", "0", "99", "1"))); r != "+OK\r\n" {
		t.Fatalf("MOVESLOTS = %q", r)
	}
	if r := string(h.MetaNode().Admin(ctx, args("save"))); r != "+OK\r\n" {
		t.Fatalf("SAVE of the metadata group = %q", r)
	}
	want := h.Map().Encode()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	log := &lockedBuffer{}
	h = start("0:0-4095:n1 1:4096-16383:n1", log)
	defer h.Close()
	testutil.WaitFor(t, 20*time.Second, "the replicated map to route", func() bool { return h.Map().Encode() == want })
	if h.Map().ShardOf(50) != 1 || h.Map().ShardOf(5000) != 0 {
		t.Errorf("map after restart: %q", h.Map().Encode())
	}
	testutil.WaitFor(t, 10*time.Second, "a warning about the changed directive", func() bool {
		return strings.Contains(log.String(), "shard-map differs from the map this cluster was bootstrapped with")
	})
	if err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	s := slot.Of([]byte(k))
	testutil.WaitFor(t, 10*time.Second, "the moved key to be served after the restart", func() bool {
		r := h.ReadBatch(ctx, [][][]byte{args("smembers", k)}, false)
		if string(r[0]) != "*1\r\n$1\r\na\r\n" && !strings.HasPrefix(string(r[0]), "-TRYAGAIN the read was not served") {
			t.Fatalf("SMEMBERS of a moved key after restart = %q", r[0])
		}
		return string(r[0]) == "*1\r\n$1\r\na\r\n"
	})
	if n, _ := h.Node(0); n.fsm.(interface{ CountKeysInSlot(int) int }).CountKeysInSlot(s) != 0 {
		t.Errorf("shard 0 still holds keys of slot %d", s)
	}
}
