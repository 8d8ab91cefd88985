package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// metaHosts are four restartable hosts of the map "0:0-8191:n1,n2,n3
// 1:8192-16383:n2,n3,n4": n1..n3 are the metadata voters, n4 is outside
// the group. start(i) starts host i again after stop[i].
type metaHosts struct {
	t     *testing.T
	m     *ShardMap
	cfgs  []Config
	hosts []*Host
	stops []func()
}

func newMetaHosts(t *testing.T) *metaHosts {
	t.Helper()
	m, err := ParseShardMap("0:0-8191:n1,n2,n3 1:8192-16383:n2,n3,n4")
	if err != nil {
		t.Fatal(err)
	}
	var peers []Peer
	for i := range 4 {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
	}
	mh := &metaHosts{t: t, m: m, hosts: make([]*Host, 4), stops: make([]func(), 4)}
	root := t.TempDir()
	for i, p := range peers {
		cfg := hostConfig(t, p.ID, filepath.Join(root, p.ID), p.Addr, peers)
		cfg.ClientAddr = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		mh.cfgs = append(mh.cfgs, cfg)
		mh.start(i)
	}
	for _, h := range mh.hosts {
		testutil.WaitFor(t, 30*time.Second, h.self+" to learn the replicated map", func() bool { return h.Map().Epoch >= 1 })
	}
	return mh
}

func (mh *metaHosts) start(i int) {
	mh.t.Helper()
	mh.hosts[i], mh.stops[i] = restartableHost(mh.t, mh.cfgs[i], mh.m)
}

// metaConfigOf is the metadata group's voters in h's replica's latest
// configuration, sorted; nil when h runs no replica.
func metaConfigOf(h *Host) []string {
	if h.MetaNode() == nil {
		return nil
	}
	voters, _, err := h.metaConfig()
	if err != nil {
		return nil
	}
	return slices.Sorted(slices.Values(voters))
}

// metaLeaderHost is the host whose replica leads the metadata group.
func metaLeaderHost(t *testing.T, hosts []*Host) *Host {
	t.Helper()
	var l *Host
	testutil.WaitFor(t, 20*time.Second, "a metadata leader", func() bool {
		for _, h := range hosts {
			if n := h.MetaNode(); n != nil && n.IsLeader() {
				l = h
				return true
			}
		}
		return false
	})
	return l
}

// waitMetaState waits until every host of hosts that should runs a
// replica whose configuration has exactly voters, the others run none,
// and every host routes by a map whose meta line names voters.
func waitMetaState(t *testing.T, hosts []*Host, voters []string) {
	t.Helper()
	want := slices.Sorted(slices.Values(voters))
	for _, h := range hosts {
		in := slices.Contains(voters, h.self)
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%s to see the metadata voters %v", h.self, want), func() bool {
			got := metaConfigOf(h)
			if in && !slices.Equal(got, want) || !in && got != nil {
				return false
			}
			return slices.Equal(slices.Sorted(slices.Values(h.Map().Meta)), want)
		})
		if in && !h.MetaNode().isVoter() {
			t.Errorf("%s's replica is not a voter in its own configuration", h.self)
		}
	}
}

// TestMetaVoters changes the metadata group's voters with RAFT.SHARD
// ADDMETA and REMOVEMETA: n4, outside the group, is added (the command
// sent to n4 itself, relayed to the metadata leader's process): it then
// runs a replica that holds the map, every replica's configuration has 4
// voters, and the map changes by compare-and-set with it; the group's
// leader is removed (its process hands the leadership over first) and
// closes its replica, leaving a marker in dir/meta, while the others
// keep changing the map and the removed one keeps learning it from them.
// Restarts with the same shard-map keep the new membership: the removed
// node starts no replica, the added one starts its own and the map goes
// on changing. Added back, the removed node resumes its replica. Refusals
// are byte-exact.
func TestMetaVoters(t *testing.T) {
	mh := newMetaHosts(t)
	n1, n4 := mh.hosts[0], mh.hosts[3]

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"addmeta", "n9"}, "-ERR ADDMETA: unknown node \"n9\" (not in peers, nor added by RAFT.SHARD ADDNODE)\r\n"},
		{[]string{"addmeta", "n2"}, "-ERR ADDMETA: node n2 is a voter of the metadata group already\r\n"},
		{[]string{"removemeta", "n4"}, "-ERR REMOVEMETA: node n4 is not a voter of the metadata group\r\n"},
		{[]string{"removemeta", "n9"}, "-ERR REMOVEMETA: node n9 is not a voter of the metadata group\r\n"},
		{[]string{"addmeta", "n@4"}, "-ERR ADDMETA: bad node id \"n@4\"\r\n"},
		{[]string{"addmeta"}, "-ERR wrong number of arguments for 'raft.shard|addmeta' command\r\n"},
		{[]string{"removemeta", "n1", "n2"}, "-ERR wrong number of arguments for 'raft.shard|removemeta' command\r\n"},
	} {
		for _, h := range []*Host{n1, n4} {
			if r := adminRetry(t, h, append([]string{"raft.shard"}, tc.args...)...); r != tc.want {
				t.Errorf("RAFT.SHARD %s on %s = %q, want %q", strings.Join(tc.args, " "), h.self, r, tc.want)
			}
		}
	}
	if m := n1.Map(); m.Epoch != 1 || m.Meta != nil {
		t.Fatalf("the refusals changed the map: %q", m.Encode())
	}

	if r := adminRetry(t, n4, "raft.shard", "addmeta", "n4"); r != "+OK\r\n" {
		t.Fatalf("ADDMETA n4 = %q", r)
	}
	waitMetaState(t, mh.hosts, []string{"n1", "n2", "n3", "n4"})
	if r := adminRetry(t, n1, "raft.shard", "addmeta", "n4"); r != "-ERR ADDMETA: node n4 is a voter of the metadata group already\r\n" {
		t.Errorf("ADDMETA n4 again = %q", r)
	}
	// n4's replica holds the map, and a change still goes by CAS.
	addNodeThrough(t, n4, "n5")
	ctx := context.Background()
	testutil.WaitFor(t, 10*time.Second, "n4's replica to hold the map with n5", func() bool {
		m, err := n4.readMeta(ctx, true)
		return err == nil && m != nil && m.Nodes["n5"].Client != ""
	})

	// The group's leader goes, one of the directive's voters (n4 is the
	// added one the restarts below keep): the command sent to n4.
	leader := metaLeaderHost(t, mh.hosts)
	if leader == n4 {
		if err := n4.handMetaOver(ctx, []string{"n1", "n2", "n3"}); err != nil {
			t.Fatal(err)
		}
		leader = metaLeaderHost(t, mh.hosts)
	}
	via := n4
	if r := adminRetry(t, via, "raft.shard", "removemeta", leader.self); r != "+OK\r\n" {
		t.Fatalf("REMOVEMETA %s (the metadata leader) = %q", leader.self, r)
	}
	var rest []string
	for _, v := range []string{"n1", "n2", "n3", "n4"} {
		if v != leader.self {
			rest = append(rest, v)
		}
	}
	waitMetaState(t, mh.hosts, rest)
	if _, err := os.Stat(filepath.Join(MetaDir(leader.cfg.DataDir), metaLeftFile)); err != nil {
		t.Errorf("no marker in the removed voter's dir/meta: %v", err)
	}
	if _, err := os.Stat(filepath.Join(MetaDir(leader.cfg.DataDir), raftDBFile)); err != nil {
		t.Errorf("the removed voter's dir/meta is gone: %v", err)
	}
	if _, meta, err := GroupsIn(leader.cfg.DataDir); err != nil || meta {
		t.Errorf("GroupsIn(the removed voter's dir) = metadata group %v, %v: want none to recover", meta, err)
	}
	if r := adminRetry(t, via, "raft.shard", "removemeta", leader.self); r != "-ERR REMOVEMETA: node "+leader.self+" is not a voter of the metadata group\r\n" {
		t.Errorf("REMOVEMETA %s again = %q", leader.self, r)
	}
	// The map changes without it, and its process still learns it.
	removeNodeThrough(t, leader, "n5")
	for _, h := range mh.hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn the map without n5", func() bool {
			_, ok := h.Map().Nodes["n5"]
			return !ok && h.Map().removed("n5")
		})
		v, err := respwire.Parse([]byte(adminRetry(t, h, "cluster", "nodes")))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(v.Str, "\n") != 4 || !strings.Contains(v.Str, ClusterNodeID(leader.self)) {
			t.Errorf("CLUSTER NODES on %s does not list 4 nodes with %s:\n%s", h.self, leader.self, v.Str)
		}
	}
	// REMOVENODE no longer refuses it as a voter, only for its replicas.
	if r := adminRetry(t, n4, "raft.shard", "removenode", leader.self); !strings.HasPrefix(r, "-ERR REMOVENODE: node "+leader.self+" still holds a replica of shard ") {
		t.Errorf("REMOVENODE %s after REMOVEMETA = %q", leader.self, r)
	}
	voter := rest[0]
	if voter == "n4" {
		voter = rest[1]
	}
	// Of a voter, with 2 left: the node that left takes its place.
	plan := "add metadata voter " + leader.self + " (add-meta " + leader.self + ")\nremove metadata voter " + voter + " (remove-meta " + voter + ")\n"
	if r := adminRetry(t, n4, "raft.shard", "removenode", voter, "dry-run"); r != string(command.AppendBulkString(nil, plan)) {
		t.Errorf("REMOVENODE %s DRY-RUN (a voter) = %q, want %q", voter, r, plan)
	}

	// Restarts with the same shard-map: the removed node starts no
	// replica, the added one starts its own.
	gone := slices.Index(mh.hosts, leader)
	for _, i := range []int{gone, 3} {
		mh.stops[i]()
		mh.start(i)
	}
	waitMetaState(t, mh.hosts, rest)
	addNodeThrough(t, mh.hosts[gone], "n6")
	for _, h := range mh.hosts {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn the map with n6", func() bool {
			_, ok := h.Map().Nodes["n6"]
			return ok
		})
	}

	// Added back, the removed node starts its replica again from its
	// directory (the marker goes) and catches up as a voter.
	back := mh.hosts[gone]
	if r := adminRetry(t, n1Or(mh.hosts, gone), "raft.shard", "addmeta", back.self); r != "+OK\r\n" {
		t.Fatalf("ADDMETA %s (removed before) = %q", back.self, r)
	}
	waitMetaState(t, mh.hosts, []string{"n1", "n2", "n3", "n4"})
	if _, err := os.Stat(filepath.Join(MetaDir(back.cfg.DataDir), metaLeftFile)); err == nil {
		t.Errorf("the marker stays in %s's dir/meta after ADDMETA", back.self)
	}
	testutil.WaitFor(t, 10*time.Second, back.self+"'s replica to hold the map with n6", func() bool {
		m, err := back.readMeta(ctx, true)
		return err == nil && m != nil && m.Nodes["n6"].Client != ""
	})
}

// n1Or is hosts[0], or hosts[1] when i is 0: a host other than hosts[i].
func n1Or(hosts []*Host, i int) *Host {
	if i == 0 {
		return hosts[1]
	}
	return hosts[0]
}

// addNodeThrough records node with RAFT.SHARD ADDNODE sent to h.
func addNodeThrough(t *testing.T, h *Host, node string) {
	t.Helper()
	// Again after -CLUSTERDOWN too (a pooled connection to a metadata
	// leader that restarted since fails mid-call): a repeated ADDNODE of
	// the same record answers +OK, as the reply tells a client to do.
	var r string
	testutil.WaitFor(t, 20*time.Second, "ADDNODE "+node+" to be run", func() bool {
		r = string(h.Admin(context.Background(), args("raft.shard", "addnode", node, "127.0.0.1:1", "127.0.0.1:2")))
		return !strings.HasPrefix(r, "-TRYAGAIN") && !strings.HasPrefix(r, "-CLUSTERDOWN")
	})
	if r != "+OK\r\n" {
		t.Fatalf("ADDNODE %s through %s = %q", node, h.self, r)
	}
}

// removeNodeThrough removes node with RAFT.SHARD REMOVENODE sent to h.
func removeNodeThrough(t *testing.T, h *Host, node string) {
	t.Helper()
	if r := adminRetry(t, h, "raft.shard", "removenode", node); r != "+OK\r\n" {
		t.Fatalf("REMOVENODE %s through %s = %q", node, h.self, r)
	}
}

// TestRemoveOnlyMetaVoter: the metadata group's only voter is not
// removed, and the map says nothing of the voters.
func TestRemoveOnlyMetaVoter(t *testing.T) {
	h := servedHosts(t, "0:0-16383:n1", 1)[0]
	want := "-ERR REMOVEMETA: node n1 is the metadata group's only voter: add another first (RAFT.SHARD ADDMETA)\r\n"
	if r := adminRetry(t, h, "raft.shard", "removemeta", "n1"); r != want {
		t.Errorf("REMOVEMETA n1 = %q, want %q", r, want)
	}
	if m := h.Map(); m.Meta != nil || h.MetaNode() == nil {
		t.Errorf("after the refusal: map %q, replica %v", m.Encode(), h.MetaNode())
	}
}

// TestMetaVotersEncode: the meta line survives the map's encoding, a map
// without one encodes as before, and a bad line is refused.
func TestMetaVotersEncode(t *testing.T) {
	m, err := ParseShardMap("0:0-16383:n1,n2,n3")
	if err != nil {
		t.Fatal(err)
	}
	if enc := m.Encode(); strings.Contains(enc, "meta") {
		t.Errorf("Encode() of a map without meta voters = %q", enc)
	}
	m.Meta = []string{"n2", "n3", "n4"}
	enc := m.Encode()
	if want := "epoch 1\nshard 0:0-16383:n1,n2,n3\nmeta n2,n3,n4\n"; enc != want {
		t.Errorf("Encode() = %q, want %q", enc, want)
	}
	back, err := DecodeShardMap(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Meta, m.Meta) || back.Encode() != enc {
		t.Errorf("DecodeShardMap(%q): meta %v, encodes as %q", enc, back.Meta, back.Encode())
	}
	for _, bad := range []string{"meta ", "meta n1,,n2", "meta n1,n1", "meta n@1"} {
		if _, err := DecodeShardMap("epoch 2\nshard 0:0-16383:n1\n" + bad + "\n"); err == nil || !strings.Contains(err.Error(), "bad meta line") {
			t.Errorf("DecodeShardMap of %q: %v", bad, err)
		}
	}
}
