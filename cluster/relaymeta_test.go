package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// lostMetaLeader listens as the metadata leader's process: it takes the
// peer handshake as a release without a secret does, then drops every
// connection on the first call it gets, so that a relayed command's
// outcome is unknown to its sender. The relayed calls (raftset.shard
// <MetaGroup> raftset.X ...) are sent on relayed, their names and
// arguments from raftset.X on.
func lostMetaLeader(t *testing.T) (addr string, relayed chan []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	relayed = make(chan []string, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					raw, err := respwire.ReadReply(br, nil)
					if err != nil {
						return
					}
					call := respwire.MustParse(raw).Strings()
					switch {
					case len(call) == 2 && strings.EqualFold(call[0], CmdAuth) && call[1] == "":
						fmt.Fprint(c, "+OK\r\n") // the secretless form
						continue
					case len(call) >= 1 && strings.EqualFold(call[0], CmdAuth):
						fmt.Fprint(c, "-ERR unknown subcommand\r\n") // a release before the challenge
						continue
					case len(call) >= 3 && call[0] == cmdShard && call[1] == fmt.Sprint(MetaGroup) && call[2] != cmdMetaMap:
						relayed <- call[2:]
					}
					return // the connection fails mid-call
				}
			}()
		}
	}()
	return ln.Addr().String(), relayed
}

// hostBehindLostLeader starts n4, a process outside the metadata group,
// whose only metadata voter, n1, is a lostMetaLeader.
func hostBehindLostLeader(t *testing.T) (*Host, chan []string) {
	t.Helper()
	leader, relayed := lostMetaLeader(t)
	peers := []Peer{
		{ID: "n1", Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))},
		{ID: "n4", Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))},
	}
	m, err := ParseShardMap("0:0-16383:n1@" + leader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := hostConfig(t, "n4", t.TempDir(), peers[1].Addr, peers)
	h, err := NewHost(cfg, m, newFSM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if h.MetaNode() != nil {
		t.Fatal("n4 runs a replica of the metadata group, which the map gives to n1")
	}
	return h, relayed
}

// expectRelayed checks that what reached lostMetaLeader is want. The
// leader records a call before it drops the connection, and the sender
// answers only once the connection failed, so the call is there already.
func expectRelayed(t *testing.T, relayed chan []string, what, want string) {
	t.Helper()
	select {
	case call := <-relayed:
		if got := strings.Join(call, " "); got != want {
			t.Errorf("%s relayed %q, want %q", what, got, want)
		}
	default:
		t.Errorf("%s reached no metadata leader", what)
	}
}

// TestRelayedCommandOutcomeUnknown sends every command relayed to the
// metadata leader's process from a process outside the metadata group
// whose connection to that leader fails mid-call: each answers
// -CLUSTERDOWN with what the client may do next, byte for byte. A repeat
// is advised outright only where it completes the command and does
// nothing twice; ADDSHARD without ID, which a repeat would run twice,
// says what to check first, and the repeats that are refused say what
// that refusal means.
func TestRelayedCommandOutcomeUnknown(t *testing.T) {
	h, relayed := hostBehindLostLeader(t)
	const lost = "the connection to the metadata leader failed; "
	for _, tc := range []struct {
		cmd, sent, want string
	}{
		{"addshard n1 n4", "raftset.addshard n1,n4",
			"ADDSHARD: " + lost + "it may have added a shard: before running it again, look in RAFT.SHARD MAP for a shard with no slot whose members are n1,n4 (ADDSHARD ID <shard> ... is safe to run again)"},
		{"addshard id 7 n1 n4", "raftset.addshardid 7 n1,n4", "ADDSHARD: " + lost + "run it again to complete it"},
		{"addreplica 1 n4", "raftset.addreplica 1 n4", "ADDREPLICA: " + lost + "run it again to complete it"},
		{"removereplica 1 n4", "raftset.removereplica 1 n4",
			"REMOVEREPLICA: " + lost + "run it again to complete it: an answer that node n4 holds no replica of shard 1 means it was removed"},
		{"addmeta n4", "raftset.addmeta n4",
			"ADDMETA: " + lost + "run it again to complete it: an answer that node n4 is a voter of the metadata group already means it was added"},
		{"removemeta n4", "raftset.removemeta n4",
			"REMOVEMETA: " + lost + "run it again to complete it: an answer that node n4 is not a voter of the metadata group means it was removed"},
		{"addnode n5 127.0.0.1:7005 127.0.0.1:17005", "raftset.addnode n5 127.0.0.1:7005 127.0.0.1:17005", "ADDNODE: " + lost + "run it again to complete it"},
		{"removenode n3", "raftset.removenode n3", "REMOVENODE: " + lost + "run it again to complete it"},
		{"removeshard 1", "raftset.removeshard 1 run", "REMOVESHARD: " + lost + "run it again to complete it"},
		{"moveslots 0 10 1", "raftset.moveslots 0 10 1", "MOVESLOTS: " + lost + "run it again to complete it"},
		{"abort 0 10", "raftset.abortmove 0 10", "ABORT: " + lost + "run it again to complete it"},
		{"abort", "raftset.abortmove", "ABORT: " + lost + "run it again to complete it"},
		{"balance-leaders", "raftset.balanceleaders run", "BALANCE-LEADERS: " + lost + "run it again to complete it"},
	} {
		r := string(h.Admin(context.Background(), args(append([]string{"raft.shard"}, strings.Fields(tc.cmd)...)...)))
		if want := "-CLUSTERDOWN " + tc.want + "\r\n"; r != want {
			t.Errorf("RAFT.SHARD %s = %q, want %q", tc.cmd, r, want)
		}
		expectRelayed(t, relayed, "RAFT.SHARD "+tc.cmd, tc.sent)
	}
}

// TestSlotRangeArgs: MOVESLOTS and ABORT read their <first> <last> alike,
// as Redis reads integers (strictint), and refuse a bad range before
// anything is relayed: byte for byte, each refusal; each accepted range
// reaches the metadata leader (lost here, so -CLUSTERDOWN) as given.
func TestSlotRangeArgs(t *testing.T) {
	h, relayed := hostBehindLostLeader(t)
	for _, tc := range []struct {
		first, last string
		ok          bool
	}{
		{"5", "10", true},
		{"0", "16383", true},
		{"7", "7", true},
		{"+5", "10", false},
		{" 5", "10", false},
		{"5 ", "10", false},
		{"05", "10", false},
		{"5", "010", false},
		{"-0", "10", false},
		{"-1", "10", false},
		{"0", "16384", false},
		{"10", "5", false},
		{"", "5", false},
		{"5", "5.0", false},
		{"0x5", "10", false},
		{"1e3", "2000", false},
		{"99999999999999999999", "5", false},
	} {
		for _, c := range []struct {
			cmd       []string
			refusal   string
			relayedAs string
		}{
			{[]string{"raft.shard", "moveslots", tc.first, tc.last, "1"},
				"-ERR MOVESLOTS wants <first> <last> <to-shard>, slots 0-16383, first <= last\r\n",
				"raftset.moveslots " + tc.first + " " + tc.last + " 1"},
			{[]string{"raft.shard", "abort", tc.first, tc.last},
				"-ERR ABORT: " + tc.first + " " + tc.last + " is not a slot range (slots are 0-16383)\r\n",
				"raftset.abortmove " + tc.first + " " + tc.last},
		} {
			r := string(h.Admin(context.Background(), args(c.cmd...)))
			if !tc.ok {
				if r != c.refusal {
					t.Errorf("%q = %q, want %q", c.cmd, r, c.refusal)
				}
				continue
			}
			if !strings.HasPrefix(r, "-CLUSTERDOWN ") {
				t.Errorf("%q = %q, want it relayed (-CLUSTERDOWN from the lost leader)", c.cmd, r)
				continue
			}
			expectRelayed(t, relayed, strings.Join(c.cmd, " "), c.relayedAs)
		}
	}
}
