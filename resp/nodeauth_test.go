package resp

import (
	"slices"
	"testing"
)

// Internal commands do not exist for a connection that has not presented
// the node secret; after RAFTSET.AUTH they reach the store's Internal entry
// point, never Admin.
func TestInternalCommandsNeedNodeAuth(t *testing.T) {
	f := newFakeStore()
	_, addr := startServer(t, Config{NodeSecret: "s3cret"}, f)
	c := dial(t, addr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"RAFTSET.FORWARD", "x"}, errr("ERR unknown command 'RAFTSET.FORWARD', with args beginning with: 'x' ")},
		{[]string{"raftset.applied"}, errr("ERR unknown command 'raftset.applied', with args beginning with: ")},
		{[]string{"raftset.onleader", "raft.remove", "n1"}, errr("ERR unknown command 'raftset.onleader', with args beginning with: 'raft.remove' 'n1' ")},
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"RAFTSET.AUTH", "wrong"}, errr("WRONGPASS invalid node secret")},
		{[]string{"raftset.applied"}, errr("ERR unknown command 'raftset.applied', with args beginning with: ")},
		{[]string{"COMMAND", "INFO", "raftset.auth"}, "*1\r\n*-1\r\n"},
		{[]string{"RAFTSET.AUTH", "s3cret"}, "+OK\r\n"},
		{[]string{"raftset.applied"}, errr("ERR unsupported by the fake store")},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.internal, []string{"raftset.applied"}) || len(f.admin) != 0 {
		t.Errorf("store saw Internal %q, Admin %q: want raftset.applied through Internal only after RAFTSET.AUTH", f.internal, f.admin)
	}
}

// RAFTSET.AUTH may come before AUTH: with the node secret it authenticates
// the connection as a node (no user, no ACL rules), so that nodes keep
// reaching each other whatever ACL does to the default user's password.
// Without any secret it accepts any, which only hides internal commands
// from ordinary clients and authenticates nothing.
func TestNodeAuthOrder(t *testing.T) {
	_, addr := startServer(t, Config{RequirePass: "pw", NodeSecret: "s"}, newFakeStore())
	c := dial(t, addr)
	if got := c.do("RAFTSET.AUTH", "wrong"); got != errr("WRONGPASS invalid node secret") {
		t.Errorf("RAFTSET.AUTH with a wrong secret = %q", got)
	}
	if got := c.do("PING"); got != errr("NOAUTH Authentication required.") {
		t.Errorf("PING after a wrong node secret = %q", got)
	}
	if got := c.do("RAFTSET.AUTH", "s"); got != "+OK\r\n" {
		t.Errorf("RAFTSET.AUTH before AUTH = %q", got)
	}
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING after RAFTSET.AUTH = %q", got)
	}
	// A user without rights changes nothing for a node.
	admin := dial(t, addr)
	admin.do("AUTH", "pw")
	if got := admin.do("ACL", "SETUSER", "default", "-@all"); got != "+OK\r\n" {
		t.Fatalf("ACL SETUSER default -@all = %q", got)
	}
	if got := c.do("SADD", "k", "m"); got != ":1\r\n" {
		t.Errorf("SADD by a node after default lost every command = %q", got)
	}

	_, open := startServer(t, Config{}, newFakeStore())
	c2 := dial(t, open)
	if got := c2.do("raftset.readindex"); got != errr("ERR unknown command 'raftset.readindex', with args beginning with: ") {
		t.Errorf("raftset.readindex without RAFTSET.AUTH = %q", got)
	}
	if got := c2.do("RAFTSET.AUTH", "anything"); got != "+OK\r\n" {
		t.Errorf("RAFTSET.AUTH without a secret = %q", got)
	}
	open2 := dial(t, open)
	open2.do("ACL", "SETUSER", "default", "-sadd")
	if got := c2.do("SADD", "k", "m"); got != errr("NOPERM User default has no permissions to run the 'sadd' command") {
		t.Errorf("SADD after an empty-secret RAFTSET.AUTH, default without sadd = %q", got)
	}
}
