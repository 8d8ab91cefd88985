package cluster

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// TestRemovedShardsEncode: removed-shard lines survive the metadata
// group's encoding, a map without them encodes as before, bad lines are
// refused, and ADDSHARD's next id skips removed ids.
func TestRemovedShardsEncode(t *testing.T) {
	const enc = "epoch 5\nshard 0:0-16383:n1,n2,n3\nshard 2::n1,n2,n3\nremoved-shard 1\nremoved-shard 3\n"
	m, err := DecodeShardMap(enc)
	if err != nil {
		t.Fatalf("DecodeShardMap(%q): %v", enc, err)
	}
	if got := m.Encode(); got != enc {
		t.Errorf("Encode() = %q, want %q", got, enc)
	}
	if got := m.clone().Encode(); got != enc {
		t.Errorf("clone().Encode() = %q, want %q", got, enc)
	}
	if !slices.Equal(m.RemovedShards, []uint32{1, 3}) || !m.shardRemoved(3) || m.shardRemoved(2) {
		t.Errorf("RemovedShards = %v", m.RemovedShards)
	}
	for _, tc := range []struct {
		smap string
		want uint32
	}{
		{enc, 4},
		{"epoch 2\nshard 0:0-16383:n1\nshard 4::n1\nremoved-shard 1\n", 5},
		{"epoch 2\nshard 0:0-16383:n1\n", 1},
	} {
		m, err := DecodeShardMap(tc.smap)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.nextShardID(); got != tc.want {
			t.Errorf("nextShardID() of %q = %d, want %d", tc.smap, got, tc.want)
		}
	}
	plain := "epoch 2\nshard 0:0-16383:n1\n"
	for _, bad := range []string{"removed-shard", "removed-shard x", "removed-shard 268435455", "removed-shard 1\nremoved-shard 1", "removed-shard 0"} {
		s := plain + bad + "\n"
		if _, err := DecodeShardMap(s); err == nil {
			t.Errorf("DecodeShardMap(%q) accepted it", s)
		}
	}
	if m, _ := DecodeShardMap(plain); m.Encode() != plain {
		t.Errorf("a map without removed shards encodes as %q", m.Encode())
	}
}

// TestRemoveShardRefusal: what refuses a shard's removal from the map
// alone, each reason byte for byte, and withoutShard's map.
func TestRemoveShardRefusal(t *testing.T) {
	const three = "epoch 3\nshard 0:0-16379:n1,n2,n3\nshard 1:16380-16381+16383:n2,n3,n4\nshard 2:16382:n4,n1,n3\n"
	for _, tc := range []struct {
		smap string
		id   uint32
		want string
	}{
		{three, 7, "no shard 7"},
		{"epoch 2\nshard 0:0-16383:n1,n2,n3\n", 0, "shard 0 is the cluster's only shard"},
		{three, 0, "shard 0 is the first shard of the map the cluster was created with, through whose members processes started with the shard-map directive find the metadata group: it stays"},
		{three, 1, "shard 1 still owns 3 slots (16380-16381,16383): move them to other shards first (raftset cluster move-slots)"},
		{three, 2, "shard 2 still owns 1 slots (16382): move them to other shards first (raftset cluster move-slots)"},
		{"epoch 3\nshard 0:0-99+101+103+105-16383:n1\nshard 1:100+102+104:n2\nshard 2::n3\n", 1, "shard 1 still owns 3 slots (100,102,104): move them to other shards first (raftset cluster move-slots)"},
		{"epoch 3\nshard 0:0-99+101+103+105+107-16383:n1\nshard 1:100+102+104+106:n2\nshard 2::n3\n", 1, "shard 1 still owns 4 slots (100,102,104,...): move them to other shards first (raftset cluster move-slots)"},
		{"epoch 3\nshard 0:0-16383:n1\nshard 1::n2\nmove 0-9 0 1 3 0\n", 1, "slots 0-9 are moving from shard 0 to shard 1: let the move complete (RAFT.SHARD MOVESLOTS again) or undo it (RAFT.SHARD ABORT) first"},
		{"epoch 5\nshard 0:0-16383:n1\nshard 1::n2\nmove 0-9 1 0 3 4\n", 1, "slots 0-9 are moving from shard 1 to shard 0: let the move complete (RAFT.SHARD MOVESLOTS again) or undo it (RAFT.SHARD ABORT) first"},
		{"epoch 3\nshard 0:0-16383:n1\nshard 1::n2\nshard 2::n3\nmove 0-9 0 1 3 0\n", 2, ""},
		// Several moves: the one involving the shard, named by its range.
		{"epoch 4\nshard 0:0-16383:n1\nshard 1::n2\nshard 2::n3\nmoving 0-9 0 1 3 0\nmoving 20-29 0 2 4 0\n", 2, "slots 20-29 are moving from shard 0 to shard 2: let the move complete (RAFT.SHARD MOVESLOTS again) or undo it (RAFT.SHARD ABORT 20 29) first"},
	} {
		m, err := DecodeShardMap(tc.smap)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := m.removeShardRefusal(tc.id, 0); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("removeShardRefusal(%q, %d) = %q, want %q", tc.smap, tc.id, got, tc.want)
		}
	}
	// The shard goes with its added members, and a home line goes when
	// the removal makes the home the node's lowest id (or the home was
	// the removed shard).
	m, err := DecodeShardMap("epoch 6\nshard 0:0-16383:n1,n2,n3\nshard 1::n2,n3,n4\nshard 2::n4,n1,n5\nadded 2 n5\nhome n4 2\nremoved-shard 3\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "epoch 7\nshard 0:0-16383:n1,n2,n3\nshard 2::n4,n1,n5\nadded 2 n5\nremoved-shard 1\nremoved-shard 3\n"
	if got := m.withoutShard(1).Encode(); got != want {
		t.Errorf("withoutShard(1) = %q, want %q", got, want)
	}
	want = "epoch 7\nshard 0:0-16383:n1,n2,n3\nshard 1::n2,n3,n4\nremoved-shard 2\nremoved-shard 3\n"
	if got := m.withoutShard(2).Encode(); got != want {
		t.Errorf("withoutShard(2) = %q, want %q", got, want)
	}
}

// TestRemoveShard removes two shards of four hosts with RAFT.SHARD
// REMOVESHARD (sent to n4, outside the metadata group, so relayed to the
// metadata leader's process): each refusal byte for byte (an unknown
// shard, bad arguments, the first shard, a shard that owns slots, one a
// slot move involves, a node's home while it holds another replica, the
// only shard), a dry run that changes nothing, then the removal: every
// host's map drops the shard at one new epoch (repeats answer +OK and
// change nothing), every host that held a replica closes it (its series
// gone from ShardStats, its directory kept), CLUSTER SHARDS no longer
// lists it, the shard left takes writes and reads, and ADDSHARD gives the
// next shard an id past the removed ones.
func TestRemoveShard(t *testing.T) {
	hosts := servedHosts(t, "0:0-16379:n1,n2,n3 1:16380-16381:n2,n3,n4 2:16382-16383:n4,n1,n3", 4)
	n1, n2, n3, n4 := hosts[0], hosts[1], hosts[2], hosts[3]
	ctx := context.Background()
	k2 := keyIn(t, "k", 16382, 16383)
	shard2, _ := n4.Node(2)
	addRetry(t, shard2, k2, "before")
	refusals := func(cases [][2]string) {
		t.Helper()
		for _, tc := range cases {
			for _, h := range []*Host{n4, n1} {
				a := append([]string{"raft.shard"}, strings.Fields(tc[0])...)
				if r := adminRetry(t, h, a...); r != tc[1] {
					t.Errorf("RAFT.SHARD %s on %s = %q, want %q", tc[0], h.self, r, tc[1])
				}
			}
		}
	}
	refusals([][2]string{
		{"removeshard 7", "-ERR REMOVESHARD: no shard 7\r\n"},
		{"removeshard x", "-ERR REMOVESHARD wants <shard> [DRY-RUN]: shard id is not an integer\r\n"},
		{"removeshard", "-ERR wrong number of arguments for 'raft.shard|removeshard' command\r\n"},
		{"removeshard 2 now", "-ERR REMOVESHARD takes no argument after <shard> but DRY-RUN\r\n"},
		{"removeshard 0", "-ERR REMOVESHARD: shard 0 is the first shard of the map the cluster was created with, through whose members processes started with the shard-map directive find the metadata group: it stays\r\n"},
		{"removeshard 2", "-ERR REMOVESHARD: shard 2 still owns 2 slots (16382-16383): move them to other shards first (raftset cluster move-slots)\r\n"},
		{"removeshard 2 dry-run", "-ERR REMOVESHARD: shard 2 still owns 2 slots (16382-16383): move them to other shards first (raftset cluster move-slots)\r\n"},
	})

	// A move of shard 2's slots that stops before its freeze: the map
	// shows it, and the removal of either shard it involves is refused.
	var once atomic.Bool
	fail := func(s string, _ SlotMove) error {
		if s == "freeze" && once.CompareAndSwap(false, true) {
			return errors.New("injected failure before " + s)
		}
		return nil
	}
	for _, h := range hosts {
		h.moveFault.Store(&fail)
	}
	if r := adminRetry(t, n4, "raft.shard", "moveslots", "16382", "16383", "1"); !strings.Contains(r, "injected failure before freeze") {
		t.Fatalf("MOVESLOTS 16382 16383 1 with a failure before the freeze = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n1 and n4 to show the move", func() bool { return len(n1.Map().Moves) > 0 && len(n4.Map().Moves) > 0 })
	moving := "-ERR REMOVESHARD: slots 16382-16383 are moving from shard 2 to shard 1: let the move complete (RAFT.SHARD MOVESLOTS again) or undo it (RAFT.SHARD ABORT) first\r\n"
	refusals([][2]string{{"removeshard 2", moving}, {"removeshard 1", moving}})
	// Completed by running it again; then shard 1 gives every slot to
	// shard 0, so that neither owns one.
	for _, mv := range [][]string{{"16382", "16383", "1"}, {"16380", "16383", "0"}} {
		if r := adminRetry(t, n4, append([]string{"raft.shard", "moveslots"}, mv...)...); r != "+OK\r\n" {
			t.Fatalf("MOVESLOTS %v = %q", mv, r)
		}
	}
	for _, h := range hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn that shards 1 and 2 own no slot", func() bool {
			m := h.Map()
			s1, _ := m.Shard(1)
			s2, _ := m.Shard(2)
			return len(m.Moves) == 0 && len(s1.Ranges) == 0 && len(s2.Ranges) == 0
		})
	}
	// n4's home is shard 1 (its lowest id), and it holds shard 2 too.
	refusals([][2]string{
		{"removeshard 1", "-ERR REMOVESHARD: shard 1 is node n4's home shard (its keyless commands and ACL users) while it holds replicas of other shards; a home goes last: remove those first\r\n"},
	})
	epoch := n1.Map().Epoch
	if r := adminRetry(t, n4, "raft.shard", "removeshard", "2", "DRY-RUN"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD REMOVESHARD 2 DRY-RUN = %q", r)
	}
	if m := n1.Map(); m.Epoch != epoch {
		t.Errorf("the dry run changed the map: %q (epoch before %d)", m.Encode(), epoch)
	}

	for _, h := range []*Host{n4, n1, n2} { // the second and third are repeats
		if r := adminRetry(t, h, "raft.shard", "removeshard", "2"); r != "+OK\r\n" {
			t.Fatalf("RAFT.SHARD REMOVESHARD 2 on %s = %q", h.self, r)
		}
	}
	shardsOf := func(h *Host) int {
		v, err := respwire.Parse(h.Admin(ctx, args("cluster", "shards")))
		if err != nil {
			t.Fatal(err)
		}
		return len(v.Elems)
	}
	for _, h := range hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn shard 2's removal", func() bool { return h.Map().shardRemoved(2) })
		testutil.WaitFor(t, 10*time.Second, h.self+" to hold no replica of shard 2", func() bool { _, ok := h.Node(2); return !ok })
		if m := h.Map(); len(m.Shards) != 2 || !slices.Equal(m.RemovedShards, []uint32{2}) {
			t.Errorf("%s: map after REMOVESHARD 2: %q", h.self, m.Encode())
		}
		for _, st := range shardStatsOf(h) {
			if strings.HasPrefix(st, "2:") {
				t.Errorf("%s: ShardStats %v still has shard 2", h.self, shardStatsOf(h))
			}
		}
		if n := shardsOf(h); n != 2 {
			t.Errorf("CLUSTER SHARDS on %s lists %d shards, want 2", h.self, n)
		}
	}
	if m := n1.Map(); m.Epoch != epoch+1 {
		t.Errorf("map epoch %d after REMOVESHARD and two repeats, want %d", m.Epoch, epoch+1)
	}
	for _, h := range []*Host{n1, n3, n4} {
		if _, err := os.Stat(ShardDir(h.cfg.DataDir, 2)); err != nil {
			t.Errorf("%s: shard 2's directory: %v (it stays for the operator)", h.self, err)
		}
	}
	if home := n4.Home(); home == nil || home.cfg.Shard != 1 {
		t.Errorf("n4's home after shard 2's removal: %v, want shard 1", home)
	}

	// Shard 1 is n4's last replica now: it goes, and n4 holds none.
	if r := adminRetry(t, n2, "raft.shard", "removeshard", "1"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD REMOVESHARD 1 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n4 to close its last replica", func() bool { _, ok := n4.Node(1); return !ok && n4.Home() == nil })
	for _, h := range hosts[:3] {
		testutil.WaitFor(t, 10*time.Second, h.self+" to hold no replica of shard 1", func() bool { _, ok := h.Node(1); return !ok })
	}
	// Asked of voters: n4, with no replica, has no shard's log to tell
	// it their client addresses, which this test's map does not give
	// (raftset cluster create's does).
	for _, h := range []*Host{n1, n2} {
		if r, want := adminRetry(t, h, "raft.shard", "removeshard", "0"), "-ERR REMOVESHARD: shard 0 is the cluster's only shard\r\n"; r != want {
			t.Errorf("RAFT.SHARD REMOVESHARD 0 on %s = %q, want %q", h.self, r, want)
		}
	}

	// The shard left takes writes and reads, with the key moved into it.
	rep, _ := n1.Node(0)
	addRetry(t, rep, k2, "after")
	if r := string(rep.ReadBatch(ctx, [][][]byte{args("smismember", k2, "before", "after", "other")}, false)[0]); r != "*3\r\n:1\r\n:1\r\n:0\r\n" {
		t.Errorf("SMISMEMBER %s before after other in shard 0 = %q", k2, r)
	}
	// A new shard takes an id past the removed ones, whose directories
	// its members still have.
	if r := adminRetry(t, n2, "raft.shard", "addshard", "n1", "n2", "n3"); r != ":3\r\n" {
		t.Fatalf("RAFT.SHARD ADDSHARD n1 n2 n3 = %q, want :3", r)
	}
	want := "-ERR ADDSHARD: shard 2 was removed (RAFT.SHARD REMOVESHARD), and an id is never given again\r\n"
	if r := adminRetry(t, n2, "raft.shard", "addshard", "id", "2", "n1", "n2", "n3"); r != want {
		t.Errorf("RAFT.SHARD ADDSHARD ID 2 n1 n2 n3 = %q, want %q", r, want)
	}
	for _, h := range hosts[:3] {
		testutil.WaitFor(t, 10*time.Second, h.self+" to run shard 3", func() bool { _, ok := h.Node(3); return ok })
	}
}
