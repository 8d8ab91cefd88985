package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// TestMoveReplica moves a replica of shard 1 from n2 to n1 with RAFT.SHARD
// ADDREPLICA and REMOVEREPLICA (sent to n4, outside the metadata group, so
// relayed to the metadata leader's process): n1 starts a replica that
// joins (not bootstraps) the group, catches up with the shard's data and
// becomes a voter; n2 leaves the group and closes its replica and keeps
// shard 0; the map records both changes; the shard keeps taking writes
// with its new members; and what breaks placement is refused.
func TestMoveReplica(t *testing.T) {
	hosts, k1 := replicaHosts(t)
	n1, n2, n4 := hosts[0], hosts[1], hosts[3]
	ctx := context.Background()
	shard1, _ := n4.Node(1)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"addreplica", "1", "n2"}, "-ERR ADDREPLICA: node n2 already holds a replica of shard 1 (two replicas of a shard on one node)\r\n"},
		{[]string{"addreplica", "1", "n9"}, "-ERR ADDREPLICA: unknown node \"n9\" (not in peers, nor added by RAFT.SHARD ADDNODE)\r\n"},
		{[]string{"addreplica", "7", "n1"}, "-ERR ADDREPLICA: no shard 7\r\n"},
		{[]string{"removereplica", "1", "n1"}, "-ERR REMOVEREPLICA: node n1 holds no replica of shard 1\r\n"},
		{[]string{"removereplica", "0", "n2"}, "-ERR REMOVEREPLICA: shard 0 is node n2's home shard; it goes last, once the node holds no other replica (raftset cluster remove-node)\r\n"},
		{[]string{"addreplica", "1"}, "-ERR wrong number of arguments for 'raft.shard|addreplica' command\r\n"},
		{[]string{"addreplica", "x", "n1"}, "-ERR ADDREPLICA wants <shard> <node>: shard id is not an integer\r\n"},
	} {
		if r := string(adminRetry(t, n4, append([]string{"raft.shard"}, tc.args...)...)); r != tc.want {
			t.Errorf("RAFT.SHARD %s = %q, want %q", strings.Join(tc.args, " "), r, tc.want)
		}
	}

	epoch := n4.Map().Epoch
	if r := adminRetry(t, n4, "raft.shard", "addreplica", "1", "n1"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDREPLICA 1 n1 = %q", r)
	}
	// Again, as a client that lost the reply sends it: the map's added
	// line shows the first run recorded n1, and the repeat answers as it
	// did, changing nothing (the epoch below counts the move's two
	// changes).
	if r := adminRetry(t, n4, "raft.shard", "addreplica", "1", "n1"); r != "+OK\r\n" {
		t.Errorf("RAFT.SHARD ADDREPLICA 1 n1 again = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n1 to run a replica of shard 1", func() bool { _, ok := n1.Node(1); return ok })
	rep, _ := n1.Node(1)
	// ADDREPLICA answered once the leader's configuration made n1 a voter;
	// n1's own copy of it follows when the entry reaches n1.
	testutil.WaitFor(t, 10*time.Second, "n1 to be a voter in its copy of shard 1's configuration", func() bool {
		s, ok := rep.selfServer()
		return ok && s.Suffrage.String() == "Voter"
	})
	testutil.WaitFor(t, 10*time.Second, "n1's replica to hold the key written before it joined", func() bool {
		return string(rep.ReadBatch(ctx, [][][]byte{args("smembers", k1)}, true)[0]) == "*1\r\n$6\r\nbefore\r\n"
	})
	// Its metrics follow without a restart: shard 1's replica is exported
	// with the key it caught up with.
	if got := shardStatsOf(n1); !slices.Equal(got, []string{"0:0", "1:1"}) {
		t.Errorf("n1's ShardStats (shard:keys) after ADDREPLICA = %v, want [0:0 1:1]", got)
	}

	if r := adminRetry(t, n1, "raft.shard", "removereplica", "1", "n2"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD REMOVEREPLICA 1 n2 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n2 to close its replica of shard 1", func() bool { _, ok := n2.Node(1); return !ok })
	if _, ok := n2.Node(0); !ok {
		t.Error("n2 closed its replica of shard 0 too")
	}
	if got := shardStatsOf(n2); !slices.Equal(got, []string{"0:0"}) {
		t.Errorf("n2's ShardStats (shard:keys) after REMOVEREPLICA = %v, want [0:0]: no series of the closed replica", got)
	}
	for _, h := range hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn the new members", func() bool {
			sh, _ := h.Map().Shard(1)
			return slices.Equal(sh.Members, []string{"n3", "n4", "n1"})
		})
	}
	if m := n4.Map(); m.Epoch != epoch+2 || !m.joins(1, "n1") || m.joins(1, "n2") {
		t.Errorf("map after the move: epoch %d (want %d), added %v", m.Epoch, epoch+2, m.Added)
	}
	if s, ok := shard1.server("n2"); ok {
		t.Errorf("n2 still in shard 1's configuration: %v", s)
	}
	// The shard may be electing (n2 may have led it): -TRYAGAIN until it
	// has a leader again, as a client sees.
	addRetry(t, rep, k1, "after")
	if r := string(rep.ReadBatch(ctx, [][][]byte{args("smismember", k1, "before", "after", "other")}, false)[0]); r != "*3\r\n:1\r\n:1\r\n:0\r\n" {
		t.Errorf("SMISMEMBER %s before after other on the moved shard = %q", k1, r)
	}

	// Shard 1 now has n3, n4, n1: one more removal keeps 2 of 3, a
	// majority; the next would not.
	if r := adminRetry(t, n4, "raft.shard", "removereplica", "1", "n3"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD REMOVEREPLICA 1 n3 = %q", r)
	}
	want := "-ERR REMOVEREPLICA: shard 1 would keep 1 of its 3 configured replicas, less than a majority\r\n"
	if r := adminRetry(t, n4, "raft.shard", "removereplica", "1", "n1"); r != want {
		t.Errorf("RAFT.SHARD REMOVEREPLICA 1 n1 = %q, want %q", r, want)
	}
}

// TestShardCallPassesARemovedReplica: a driver on a process whose replica
// of a shard the group removed while the map still names it (REMOVEREPLICA
// of this very node, its first reply lost with the shard's leader, then
// retried) still reaches the shard's leader. Its own replica never learns
// a leader again; asked alone, it answered -TRYAGAIN until the driver's
// limit (TestMoveReplica and TestFetchMapPassesASilentVoter failed so when
// the metadata leader's process was the removed node's).
func TestShardCallPassesARemovedReplica(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3", 3)
	n1, n2 := hosts[0], hosts[1]
	ctx := context.Background()
	if _, err := n2.retry(ctx, func() []byte {
		r := n2.shardCall(ctx, 1, args(cmdRemoveMember, "n1"))
		if strings.HasPrefix(string(r), "-ERR no member with id") {
			return command.OK // an earlier attempt's
		}
		return r
	}); err != nil {
		t.Fatalf("removing n1 from shard 1's group: %v", err)
	}
	rep, _ := n1.Node(1)
	testutil.WaitFor(t, 30*time.Second, "n1's removed replica to know no leader", func() bool {
		id, _ := rep.leaderClient()
		return id == ""
	})
	if r := string(rep.Internal(ctx, args(cmdSuffrage, "n1"))); !strings.HasPrefix(r, "-TRYAGAIN") {
		t.Fatalf("n1's removed replica answers %q, want -TRYAGAIN (no leader)", r)
	}
	r, err := n1.retry(ctx, func() []byte { return n1.shardCall(ctx, 1, args(cmdSuffrage, "n1")) })
	if err != nil || string(r) != "$0\r\n\r\n" {
		t.Fatalf("n1's call to shard 1's leader: %q, %v; want n1 named in no configuration", r, err)
	}
}

// shardStatsOf is h's metrics per replica as "shard:keys", in order.
func shardStatsOf(h *Host) []string {
	var out []string
	for _, st := range h.ShardStats() {
		out = append(out, fmt.Sprintf("%d:%d", st.Shard, st.Keys))
	}
	return out
}

// adminRetry runs an admin command on h, again while it answers -TRYAGAIN
// (the metadata group or a shard electing), as a client would.
func adminRetry(t *testing.T, h *Host, a ...string) string {
	t.Helper()
	var r string
	testutil.WaitFor(t, 20*time.Second, strings.Join(a, " ")+" to be run", func() bool {
		r = string(h.Admin(context.Background(), args(a...)))
		return !strings.HasPrefix(r, "-TRYAGAIN")
	})
	return r
}

// replicaHosts serves the four hosts of the replica move and removal tests
// (shard 1 on n2, n3, n4: n1 can take a replica of it) and writes one
// member to k1, a key of shard 1, so that a replica that joins has data
// to catch up with.
func replicaHosts(t *testing.T) ([]*Host, string) {
	t.Helper()
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n2,n3,n4", 4)
	k1 := keyIn(t, "k", 8192, 16383)
	shard1, _ := hosts[3].Node(1)
	addRetry(t, shard1, k1, "before")
	return hosts, k1
}

// writeRetry runs an idempotent write on n, again while it answers
// -TRYAGAIN (not run: no leader yet) or -CLUSTERDOWN (outcome unknown:
// leadership lost), as a client would.
func writeRetry(t *testing.T, n *Node, a ...string) string {
	t.Helper()
	r, _ := writeRetryUnknown(t, n, a...)
	return r
}

// writeRetryUnknown is writeRetry, also saying whether an attempt's
// outcome was unknown (-CLUSTERDOWN): only then may a retried SADD answer
// :0 for a member it was the first to write.
func writeRetryUnknown(t *testing.T, n *Node, a ...string) (string, bool) {
	t.Helper()
	var r string
	unknown := false
	testutil.WaitFor(t, 20*time.Second, strings.Join(a, " ")+" to be run", func() bool {
		rs, _ := n.WriteIndexed(context.Background(), []command.Op{cmd(a...)})
		r = string(rs[0])
		if strings.HasPrefix(r, "-TRYAGAIN") || strings.HasPrefix(r, "-CLUSTERDOWN") {
			// Logged: a retried write's reply depends on whether this one
			// was applied, which only -CLUSTERDOWN leaves open.
			t.Logf("%s: %q, retrying", strings.Join(a, " "), r)
			unknown = unknown || strings.HasPrefix(r, "-CLUSTERDOWN")
			return false
		}
		return true
	})
	return r, unknown
}

// addRetry SADDs a member no earlier write added to key on n, through
// elections as writeRetry does, and fails the test unless it is
// acknowledged as added: :1, or :0 after an attempt whose outcome was
// unknown (that attempt added it).
func addRetry(t *testing.T, n *Node, key, member string) {
	t.Helper()
	r, unknown := writeRetryUnknown(t, n, "sadd", key, member)
	if r != ":1\r\n" && !(unknown && r == ":0\r\n") {
		t.Fatalf("SADD %s %s = %q (an earlier attempt's outcome unknown: %v)", key, member, r, unknown)
	}
}

// TestAddedMembersEncode: the map's record of added members survives the
// metadata group's encoding, and a map without one encodes as before.
func TestAddedMembersEncode(t *testing.T) {
	m, err := ParseShardMap("0:0-8191:n1,n2,n3 1:8192-16383:n2,n3,n4,n1")
	if err != nil {
		t.Fatal(err)
	}
	plain := m.Encode()
	if strings.Contains(plain, "added") {
		t.Errorf("Encode() of a map without added members = %q", plain)
	}
	m.Added = map[uint32][]string{1: {"n1"}}
	enc := m.Encode()
	want := "epoch 1\nshard 0:0-8191:n1,n2,n3\nshard 1:8192-16383:n2,n3,n4,n1\nadded 1 n1\n"
	if enc != want {
		t.Errorf("Encode() = %q, want %q", enc, want)
	}
	back, err := DecodeShardMap(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !back.joins(1, "n1") || back.joins(1, "n2") || back.joins(0, "n1") || back.Encode() != enc {
		t.Errorf("DecodeShardMap(%q): added %v, encodes as %q", enc, back.Added, back.Encode())
	}
	if _, err := DecodeShardMap("epoch 2\nshard 0:0-16383:n1\nadded x n1\n"); err == nil || !strings.Contains(err.Error(), "bad added line") {
		t.Errorf("DecodeShardMap of a bad added line: %v", err)
	}
}
