package cluster

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// sentinelFields turns a Sentinel instance reply (name, value, ...) into a
// map, failing on a repeated or missing value.
func sentinelFields(t *testing.T, r testutil.Reply) map[string]string {
	t.Helper()
	if r.Kind != '*' || len(r.Elems)%2 != 0 {
		t.Fatalf("instance reply %s", r)
	}
	m := map[string]string{}
	for i := 0; i < len(r.Elems); i += 2 {
		if _, dup := m[r.Elems[i].Str]; dup {
			t.Fatalf("field %q twice in %s", r.Elems[i].Str, r)
		}
		m[r.Elems[i].Str] = r.Elems[i+1].Str
	}
	return m
}

// TestSentinelReplies checks the replies Sentinel clients parse: every field
// Redis Sentinel 7 sends for a master, a replica and a sentinel, in its
// order, for any master name, from every node.
func TestSentinelReplies(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) { cfg.MasterName = "raftset" })
	l := c.leader()
	c.published()
	ctx := context.Background()
	masterKeys := []string{"name", "ip", "port", "runid", "flags", "link-pending-commands", "link-refcount",
		"last-ping-sent", "last-ok-ping-reply", "last-ping-reply", "down-after-milliseconds", "info-refresh",
		"role-reported", "role-reported-time", "config-epoch", "num-slaves", "num-other-sentinels", "quorum",
		"failover-timeout", "parallel-syncs"}
	replicaKeys := []string{"name", "ip", "port", "runid", "flags", "link-pending-commands", "link-refcount",
		"last-ping-sent", "last-ok-ping-reply", "last-ping-reply", "down-after-milliseconds", "info-refresh",
		"role-reported", "role-reported-time", "master-link-down-time", "master-link-status", "master-host",
		"master-port", "slave-priority", "slave-repl-offset", "replica-announced"}
	lhost, lport, _ := net.SplitHostPort(l.cfg.ClientAddr)
	keys := func(r testutil.Reply) []string {
		var out []string
		for i := 0; i < len(r.Elems); i += 2 {
			out = append(out, r.Elems[i].Str)
		}
		return out
	}
	for _, m := range c.members {
		do := func(a ...string) testutil.Reply {
			return testutil.ParseReply(string(m.node.Admin(ctx, args(a...))))
		}
		masters := do("sentinel", "masters")
		if len(masters.Elems) != 1 {
			t.Fatalf("%s: SENTINEL MASTERS = %s", m.id, masters)
		}
		for _, r := range []testutil.Reply{masters.Elems[0], do("sentinel", "master", "raftset")} {
			if got := keys(r); !slices.Equal(got, masterKeys) {
				t.Errorf("%s: master fields %q, want %q", m.id, got, masterKeys)
			}
			f := sentinelFields(t, r)
			if f["name"] != "raftset" || f["ip"] != lhost || f["port"] != lport || f["runid"] != l.id ||
				f["flags"] != "master" || f["num-slaves"] != "2" || f["num-other-sentinels"] != "2" || f["quorum"] != "2" {
				t.Errorf("%s: master %v", m.id, f)
			}
		}
		if f := sentinelFields(t, do("sentinel", "master", "other")); f["name"] != "other" || f["ip"] != lhost {
			t.Errorf("%s: SENTINEL MASTER other = %v", m.id, f)
		}
		for _, sub := range []string{"replicas", "slaves"} {
			reps := do("sentinel", sub, "raftset")
			if len(reps.Elems) != 2 {
				t.Fatalf("%s: SENTINEL %s = %s", m.id, sub, reps)
			}
			var addrs []string
			for _, r := range reps.Elems {
				if got := keys(r); !slices.Equal(got, replicaKeys) {
					t.Errorf("%s: replica fields %q, want %q", m.id, got, replicaKeys)
				}
				f := sentinelFields(t, r)
				if f["flags"] != "slave" || f["master-link-status"] != "ok" || f["master-host"] != lhost || f["master-port"] != lport {
					t.Errorf("%s: replica %v", m.id, f)
				}
				addrs = append(addrs, net.JoinHostPort(f["ip"], f["port"]))
			}
			var want []string
			for _, f := range c.followers(l) {
				want = append(want, f.cfg.ClientAddr)
			}
			slices.Sort(addrs)
			slices.Sort(want)
			if !slices.Equal(addrs, want) {
				t.Errorf("%s: replicas at %q, want %q", m.id, addrs, want)
			}
		}
		sents := do("sentinel", "sentinels", "raftset")
		if len(sents.Elems) != 2 {
			t.Fatalf("%s: SENTINEL SENTINELS = %s", m.id, sents)
		}
		for _, r := range sents.Elems {
			if f := sentinelFields(t, r); f["flags"] != "sentinel" || f["runid"] == m.id || f["voted-leader"] != "?" {
				t.Errorf("%s: sentinel %v", m.id, f)
			}
		}
		if got := string(m.node.Admin(ctx, args("sentinel", "ckquorum", "raftset"))); got != "+OK 3 usable Sentinels. Quorum and failover authorization can be reached\r\n" {
			t.Errorf("%s: CKQUORUM = %q", m.id, got)
		}
		if got := string(m.node.Admin(ctx, args("sentinel", "is-master-down-by-addr", lhost, lport, "0", "*"))); got != "*3\r\n:0\r\n$1\r\n*\r\n:0\r\n" {
			t.Errorf("%s: IS-MASTER-DOWN-BY-ADDR leader = %q", m.id, got)
		}
		if got := string(m.node.Admin(ctx, args("sentinel", "is-master-down-by-addr", "10.0.0.1", "1", "0", "*"))); got != "*3\r\n:1\r\n$1\r\n*\r\n:0\r\n" {
			t.Errorf("%s: IS-MASTER-DOWN-BY-ADDR other = %q", m.id, got)
		}
		if got := string(m.node.Admin(ctx, args("sentinel", "master"))); got != "-ERR wrong number of arguments for 'sentinel|master' command\r\n" {
			t.Errorf("%s: SENTINEL MASTER = %q", m.id, got)
		}
	}

	// A replica whose client port does not answer is flagged s_down (once
	// the last probe's answer is older than sentinelProbeTTL).
	f := c.followers(l)[0]
	f.srv.Close()
	testutil.WaitFor(t, 10*time.Second, "the closed replica flagged s_down", func() bool {
		reps := testutil.ParseReply(string(l.node.Admin(ctx, args("sentinel", "replicas", "raftset"))))
		downs, ups := 0, 0
		for _, r := range reps.Elems {
			fl := sentinelFields(t, r)
			switch {
			case net.JoinHostPort(fl["ip"], fl["port"]) == f.cfg.ClientAddr &&
				fl["flags"] == "s_down,slave,disconnected" && fl["master-link-status"] == "err":
				downs++
			case fl["flags"] == "slave":
				ups++
			}
		}
		return downs == 1 && ups == 1
	})
}
