package fsm

import (
	"bytes"
	"errors"
	"testing"

	"raftset/internal/command"
	"raftset/snapshot"
)

// ACL changes are log entries: every replica that applies the same entries
// holds the same users, and Prepare refuses bad ones with Redis's replies.
func TestACLApplied(t *testing.T) {
	a, b := newTestFSM(t), newTestFSM(t)
	steps := []struct{ args []string }{
		{[]string{"ACL", "SETUSER", "alice", "on", ">pw", "~app:*", "+@read", "+sadd"}},
		{[]string{"acl", "setuser", "bob", "on", "nopass", "+@all", "allkeys"}},
		{[]string{"acl", "deluser", "bob", "nobody"}},
	}
	want := []string{"+OK\r\n", "+OK\r\n", ":1\r\n"}
	for i, s := range steps {
		for _, f := range []*FSM{a, b} {
			if got := doCmd(t, f, 1000, s.args...); got != want[i] {
				t.Fatalf("%v = %q; want %q", s.args, got, want[i])
			}
		}
	}
	if !bytes.Equal(a.Users().Marshal(), b.Users().Marshal()) {
		t.Fatal("replicas hold different users")
	}
	if err := a.Users().Check("alice", "sadd", "", nil); err != nil {
		t.Errorf("alice may not SADD: %v", err)
	}
	if err := a.Users().Check("alice", "del", "", nil); err == nil {
		t.Error("alice may DEL")
	}
	if _, ok := a.Users().User("bob"); ok {
		t.Error("bob was not deleted")
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"acl", "setuser", "carol", "on", "+nosuch"}, "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n"},
		{[]string{"acl", "setuser", "has space"}, "-ERR Usernames can't contain spaces or null characters\r\n"},
		{[]string{"acl", "load", "f.acl", "user x on +nosuch\n"}, "-ERR f.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n"},
	} {
		op := a.Prepare(toArgs(c.args...), 1000)
		if op.Kind != command.OpReply || string(op.Reply) != c.want {
			t.Errorf("Prepare(%v) = %v %q; want the reply %q", c.args, op.Kind, op.Reply, c.want)
		}
	}
	if _, ok := a.Users().User("carol"); ok {
		t.Error("a refused SETUSER created its user")
	}
	// DELUSER default is refused when applied, on every replica alike.
	if got := doCmd(t, a, 1000, "acl", "deluser", "default"); got != "-ERR The 'default' user cannot be removed\r\n" {
		t.Errorf("DELUSER default = %q", got)
	}
	// ACL LOAD's log form replaces every user.
	if got := doCmd(t, a, 1000, "acl", "load", "f.acl", "user zed on nopass +ping\n"); got != "+OK\r\n" {
		t.Fatalf("acl load = %q", got)
	}
	if names := a.Users().Names(); len(names) != 2 || names[0] != "default" || names[1] != "zed" {
		t.Errorf("users after load = %v", names)
	}
	// The read path never changes users.
	if got := string(a.Read(toArgs("acl", "setuser", "eve"), 1000, newTestSource(1), nil)); got != "-"+errWriteInRead+"\r\n" {
		t.Errorf("ACL SETUSER on the read path = %q", got)
	}
}

// Users survive a snapshot; a snapshot of untouched users carries no
// AuxACL (so it is what it was before users existed), and restoring it
// brings back a new node's users.
func TestACLInSnapshot(t *testing.T) {
	f := newTestFSM(t)
	applyCmd(t, f, 1000, "sadd", "s", "a")
	plain := persist(t, f)
	if bytes.Contains(plain, []byte(AuxACL)) {
		t.Errorf("a snapshot without users holds %s", AuxACL)
	}
	doCmd(t, f, 1000, "acl", "setuser", "alice", "on", ">pw", "~k*", "+get")
	doCmd(t, f, 1000, "acl", "setuser", "default", "resetpass", ">root")
	data := persist(t, f)
	g := restored(t, data)
	if !bytes.Equal(g.Users().Marshal(), f.Users().Marshal()) {
		t.Fatalf("restored users differ:\n%q\n%q", g.Users().Marshal(), f.Users().Marshal())
	}
	if !g.Users().Authenticate([]byte("alice"), []byte("pw")) || !g.Users().RequirePassPinned() {
		t.Error("restored users lost alice's password or the pinned default password")
	}
	if got := g.RestoredAux(); len(got) != 0 {
		t.Errorf("RestoredAux() = %+v: the users leaked into the caller's fields", got)
	}
	if err := g.Restore(nopCloser{bytes.NewReader(plain)}); err != nil {
		t.Fatal(err)
	}
	if names := g.Users().Names(); len(names) != 1 || !g.Users().DefaultNoPass() {
		t.Errorf("users after restoring a snapshot without users: %v, default nopass %v", names, g.Users().DefaultNoPass())
	}
}

// A snapshot whose users do not decode is refused as a whole: keys and
// users stay as they were.
func TestACLCorruptInSnapshot(t *testing.T) {
	f := newTestFSM(t)
	applyCmd(t, f, 1000, "sadd", "other", "y")
	f.SetSnapshotAux(func() []snapshot.AuxField {
		return []snapshot.AuxField{{Key: AuxACL, Value: "RSACL\x09"}}
	})
	data := persist(t, f)
	g := newTestFSM(t)
	applyCmd(t, g, 1000, "sadd", "keep", "x")
	doCmd(t, g, 1000, "acl", "setuser", "alice", "on")
	before, users := dump(g), g.Users().Marshal()
	err := g.Restore(nopCloser{bytes.NewReader(data)})
	if !errors.Is(err, ErrSnapshot) {
		t.Fatalf("Restore(corrupt users) = %v; want ErrSnapshot", err)
	}
	if dump(g) != before || !bytes.Equal(g.Users().Marshal(), users) {
		t.Error("a refused snapshot changed the state")
	}
}
