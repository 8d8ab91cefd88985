package resp

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"raftset/internal/peerauth/challenge"
	"raftset/internal/respwire"
)

// nodeAuth runs RAFTSET.AUTH's handshake with secret on c, checking the
// server's proof, and returns the reply to the client's proof (or the
// first error reply).
func (tc *testConn) nodeAuth(secret string) string {
	tc.t.Helper()
	nc := bytes.Repeat([]byte{'n'}, challenge.NonceSize)
	raw := tc.do("RAFTSET.AUTH", "HELLO", string(nc))
	answer, err := respwire.Parse([]byte(raw))
	if err != nil || answer.Kind != '*' || len(answer.Elems) != 2 {
		return raw
	}
	ns, serverMAC := []byte(answer.Elems[0].Str), []byte(answer.Elems[1].Str)
	proof := challenge.ClientMAC([]byte(secret), challenge.PurposeInternal, nc, ns)
	if _, err := challenge.Prove([]byte(secret), challenge.PurposeInternal, nc, ns, serverMAC); err == nil != (secret == tc.nodeSecret) {
		tc.t.Errorf("the server's proof verified with %q: %v", secret, err)
	}
	return tc.do("RAFTSET.AUTH", "PROOF", string(proof))
}

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
		{[]string{"RAFTSET.AUTH", "s3cret"}, errr("ERR wrong number of arguments for 'raftset.auth' command")},
		{[]string{"nodeAuth", "wrong"}, errr("WRONGPASS invalid node secret")},
		{[]string{"raftset.applied"}, errr("ERR unknown command 'raftset.applied', with args beginning with: ")},
		{[]string{"RAFTSET.AUTH", "PROOF", "x"}, errr("ERR RAFTSET.AUTH PROOF without HELLO")},
		{[]string{"RAFTSET.AUTH", "HELLO", "short"}, errr("ERR invalid node handshake")},
		{[]string{"RAFTSET.AUTH", "SECRET", "s3cret"}, errr("ERR syntax error")},
		{[]string{"COMMAND", "INFO", "raftset.auth"}, "*1\r\n*-1\r\n"},
		{[]string{"nodeAuth", "s3cret"}, "+OK\r\n"},
		{[]string{"raftset.applied"}, errr("ERR unsupported by the fake store")},
	} {
		var got string
		if tc.args[0] == "nodeAuth" {
			c.nodeSecret = "s3cret"
			got = c.nodeAuth(tc.args[1])
		} else {
			got = c.do(tc.args...)
		}
		if got != tc.want {
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
// Without any secret the handshake runs with an empty key, which only hides
// internal commands from ordinary clients and authenticates nothing.
func TestNodeAuthOrder(t *testing.T) {
	_, addr := startServer(t, Config{RequirePass: "pw", NodeSecret: "s"}, newFakeStore())
	c := dial(t, addr)
	c.nodeSecret = "s"
	if got := c.nodeAuth("wrong"); got != errr("WRONGPASS invalid node secret") {
		t.Errorf("RAFTSET.AUTH with a wrong secret = %q", got)
	}
	if got := c.do("PING"); got != errr("NOAUTH Authentication required.") {
		t.Errorf("PING after a wrong node secret = %q", got)
	}
	if got := c.nodeAuth("s"); got != "+OK\r\n" {
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
	if got := c2.nodeAuth("anything"); got != errr("WRONGPASS invalid node secret") {
		t.Errorf("RAFTSET.AUTH with a secret where there is none = %q", got)
	}
	if got := c2.nodeAuth(""); got != "+OK\r\n" {
		t.Errorf("RAFTSET.AUTH without a secret = %q", got)
	}
	open2 := dial(t, open)
	open2.do("ACL", "SETUSER", "default", "-sadd")
	if got := c2.do("SADD", "k", "m"); got != errr("NOPERM User default has no permissions to run the 'sadd' command") {
		t.Errorf("SADD after an empty-secret RAFTSET.AUTH, default without sadd = %q", got)
	}
}

// A proof answers one challenge: replaying it, or the whole exchange
// recorded from another connection, is refused.
func TestNodeAuthCannotBeReplayed(t *testing.T) {
	_, addr := startServer(t, Config{NodeSecret: "s3cret"}, newFakeStore())
	c := dial(t, addr)
	c.nodeSecret = "s3cret"
	nc := bytes.Repeat([]byte{'n'}, challenge.NonceSize)
	answer := respwire.MustParse([]byte(c.do("RAFTSET.AUTH", "HELLO", string(nc))))
	proof := challenge.ClientMAC([]byte("s3cret"), challenge.PurposeInternal, nc, []byte(answer.Elems[0].Str))
	if got := c.do("RAFTSET.AUTH", "PROOF", string(proof)); got != "+OK\r\n" {
		t.Fatalf("PROOF = %q", got)
	}
	if got := c.do("RAFTSET.AUTH", "PROOF", string(proof)); got != errr("ERR RAFTSET.AUTH PROOF without HELLO") {
		t.Errorf("the same PROOF again = %q", got)
	}
	// The eavesdropper replays the recorded HELLO and PROOF elsewhere: the
	// server's nonce differs, so the proof does not verify.
	c2 := dial(t, addr)
	c2.do("RAFTSET.AUTH", "HELLO", string(nc))
	if got := c2.do("RAFTSET.AUTH", "PROOF", string(proof)); got != errr("WRONGPASS invalid node secret") {
		t.Errorf("a replayed PROOF = %q", got)
	}
	if got := c2.do("raftset.applied"); got != errr("ERR unknown command 'raftset.applied', with args beginning with: ") {
		t.Errorf("raftset.applied after a replay = %q", got)
	}
	// A proof for the Raft port's purpose is no good here.
	answer = respwire.MustParse([]byte(c2.do("RAFTSET.AUTH", "HELLO", string(nc))))
	raftProof := challenge.ClientMAC([]byte("s3cret"), challenge.PurposeRaft, nc, []byte(answer.Elems[0].Str))
	if got := c2.do("RAFTSET.AUTH", "PROOF", string(raftProof)); got != errr("WRONGPASS invalid node secret") {
		t.Errorf("a Raft-port proof = %q", got)
	}
}

// The previous release's one-step RAFTSET.AUTH is accepted only where it
// proves nothing either way (no secret), so that a rolling upgrade of such a
// cluster keeps forwarding; with a secret, only the handshake counts.
func TestNodeAuthPreviousReleaseForm(t *testing.T) {
	_, open := startServer(t, Config{}, newFakeStore())
	c := dial(t, open)
	if got := c.do("RAFTSET.AUTH", ""); got != "+OK\r\n" {
		t.Errorf("RAFTSET.AUTH \"\" without a secret = %q", got)
	}
	if got := c.do("raftset.readindex"); strings.Contains(got, "unknown command") {
		t.Errorf("an internal command after the old form = %q", got)
	}
	_, guarded := startServer(t, Config{RequirePass: "pw", NodeSecret: "s"}, newFakeStore())
	g := dial(t, guarded)
	for _, secret := range []string{"s", ""} {
		if got := g.do("RAFTSET.AUTH", secret); got != errr("ERR wrong number of arguments for 'raftset.auth' command") {
			t.Errorf("RAFTSET.AUTH %q with a secret set = %q", secret, got)
		}
	}
	if got := g.do("raftset.readindex"); !strings.Contains(got, "NOAUTH") && !strings.Contains(got, "unknown command") {
		t.Errorf("an internal command after a refused old form = %q", got)
	}
}
