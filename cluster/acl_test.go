package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// respDo runs commands on one connection to a member's front end and
// returns the raw replies joined.
func respDo(t *testing.T, m *member, cmds ...[]string) string {
	t.Helper()
	c, err := respwire.Dial(m.cfg.ClientAddr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out strings.Builder
	for _, a := range cmds {
		r, err := c.Do(a...)
		if err != nil {
			t.Fatalf("%s %v: %v", m.id, a, err)
		}
		out.WriteString(r)
	}
	return out.String()
}

func line(s string) []string { return strings.Fields(s) }

// checkAlice checks, on every running member, what alice may do and that
// the default user's password is the one ACL set.
func checkAlice(t *testing.T, c *servedCluster, when string) {
	t.Helper()
	for _, m := range c.members {
		if m.srv == nil {
			continue
		}
		got := respDo(t, m, line("AUTH alice pa"), line("SMEMBERS a:1"), line("SADD b:1 x"), line("DEL a:1"), line("ACL WHOAMI"))
		want := "+OK\r\n*1\r\n$1\r\nx\r\n-NOPERM No permissions to access a key\r\n" +
			"-NOPERM User alice has no permissions to run the 'del' command\r\n" +
			"-NOPERM User alice has no permissions to run the 'acl|whoami' command\r\n"
		if got != want {
			t.Errorf("%s, %s: alice got %q; want %q", when, m.id, got, want)
		}
		if got := respDo(t, m, line("AUTH pw"), line("AUTH root")); got != "-WRONGPASS invalid username-password pair or user is disabled.\r\n+OK\r\n" {
			t.Errorf("%s, %s: AUTH requirepass, AUTH ACL password = %q", when, m.id, got)
		}
	}
}

// Users created through a follower are enforced by every node, survive a
// snapshot installed on a lagging follower and a restart of every node;
// once ACL changed the default user's password (so requirepass no longer
// opens it), the nodes still reach each other (RAFTSET.AUTH alone).
func TestACLUsersAcrossNodes(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) {
		cfg.Password = "pw"
		cfg.InMemory = false
		cfg.DataDir = t.TempDir()
		cfg.TrailingLogs = 5
		cfg.SnapshotThreshold = 1 << 30
	})
	l := c.leader()
	c.published()
	f := c.followers(l)[0]
	if got := respDo(t, f, line("AUTH pw"),
		line("ACL SETUSER alice on >pa ~a:* +sadd +smembers"),
		line("ACL SETUSER alice +nosuch"),
		line("SADD a:1 x"),
		line("ACL SETUSER default resetpass >root")); got != "+OK\r\n+OK\r\n-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n:1\r\n+OK\r\n" {
		t.Fatalf("ACL SETUSER through follower %s = %q", f.id, got)
	}
	c.converged(l)
	testutil.WaitFor(t, 10*time.Second, "the users on every node", func() bool {
		for _, m := range c.members {
			if u, ok := m.fsm.Users().User("alice"); !ok || !u.Enabled() || !m.fsm.Users().RequirePassPinned() {
				return false
			}
		}
		return true
	})
	checkAlice(t, c, "after SETUSER")

	// A follower cut off while bob is created gets him from a snapshot.
	lag := c.followers(l)[1]
	if lag == f {
		lag = c.followers(l)[0]
	}
	lag.trans.DisconnectAll()
	for _, m := range c.followers(lag) {
		m.trans.Disconnect(raft.ServerAddress(lag.id))
	}
	if got := respDo(t, l, line("AUTH root"), line("ACL SETUSER bob on nopass +ping")); got != "+OK\r\n+OK\r\n" {
		t.Fatalf("ACL SETUSER bob = %q", got)
	}
	for i := range 20 {
		write1(t, l.node, "sadd", "filler", fmt.Sprint(i))
	}
	ctx := context.Background()
	for _, m := range c.followers(lag) {
		if got := string(m.node.Admin(ctx, args("raft.snapshot"))); got != "+OK\r\n" {
			t.Fatalf("RAFT.SNAPSHOT on %s = %q", m.id, got)
		}
	}
	for _, m := range c.followers(lag) {
		lag.trans.Connect(raft.ServerAddress(m.id), m.trans)
		m.trans.Connect(raft.ServerAddress(lag.id), lag.trans)
	}
	c.converged(l)
	testutil.WaitFor(t, 10*time.Second, "a snapshot installed on "+lag.id, func() bool {
		return lag.node.raft.Stats()["last_snapshot_index"] != "0"
	})
	if got := respDo(t, lag, line("AUTH bob x"), line("PING"), line("GET k")); got != "+OK\r\n+PONG\r\n-NOPERM User bob has no permissions to run the 'get' command\r\n" {
		t.Errorf("bob on %s after the snapshot install = %q", lag.id, got)
	}
	checkAlice(t, c, "after the snapshot install")

	// Every node restarts (from its snapshot or log).
	var cfgs []Config
	for _, m := range c.members {
		m.stop()
		m.trans = nil
		cfgs = append(cfgs, m.cfg)
	}
	for _, cfg := range cfgs {
		cfg.Transport = nil
		c.start(cfg)
	}
	l = c.leader()
	c.converged(l)
	checkAlice(t, c, "after a restart")
	// Writes still travel from a follower to the leader.
	if got := respDo(t, c.followers(l)[0], line("AUTH alice pa"), line("SADD a:2 y")); got != "+OK\r\n:1\r\n" {
		t.Errorf("alice's SADD through a follower after the restart = %q", got)
	}
}
