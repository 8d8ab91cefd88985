package acl

import (
	"bytes"
	"slices"
	"testing"

	"raftset/internal/command"
)

func TestTableCommands(t *testing.T) {
	r, err := New(TableCommands(command.Commands()), globMatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetUser("u", words("on nopass ~* +@set -sadd +acl|whoami")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd, sub string
		want     string
	}{
		{"smembers", "", ""},
		{"sadd", "", "NOPERM User u has no permissions to run the 'sadd' command"},
		{"acl", "whoami", ""},
		{"acl", "setuser", "NOPERM User u has no permissions to run the 'acl|setuser' command"},
		{"auth", "", ""}, // no_auth: every user
		{"raftset.forward", "", "NOPERM User u has no permissions to run the 'raftset.forward' command"},
	} {
		err := r.Check("u", c.cmd, c.sub, nil)
		if got := errText(err); got != c.want {
			t.Errorf("Check(u, %s %s) = %q; want %q", c.cmd, c.sub, got, c.want)
		}
	}
	cats := command.ACLCategories(command.Commands()["acl"].Sub("setuser"))
	if !slices.Equal(cats, []string{"@admin", "@slow", "@dangerous"}) {
		t.Errorf("acl|setuser categories = %v", cats)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRequirePassOverlay: requirepass is the default user's password only
// until the replicated users set it; it is never marshaled.
func TestRequirePassOverlay(t *testing.T) {
	r := mustNew(t, smallTable())
	before := r.Marshal()
	gen := r.Generation()
	r.SetRequirePass("pw")
	if r.Generation() == gen {
		t.Error("SetRequirePass did not move the generation")
	}
	if !bytes.Equal(r.Marshal(), before) {
		t.Error("requirepass reached the marshaled users")
	}
	if r.DefaultNoPass() || !r.Authenticate([]byte("default"), []byte("pw")) {
		t.Fatal("requirepass not applied")
	}
	// Other rules of the default user keep the overlay.
	if err := r.SetUser("default", words("-keys")); err != nil {
		t.Fatal(err)
	}
	if r.RequirePassPinned() || !r.Authenticate([]byte("default"), []byte("pw")) {
		t.Fatal("a rule without passwords dropped requirepass")
	}
	u, _ := r.User("default")
	if got := u.Describe(); got != "on #"+hashPassword([]byte("pw"))+" ~* &* +@all -keys" {
		t.Errorf("default user shown as %q", got)
	}
	// A password rule pins the default user's passwords: requirepass is ignored.
	if err := r.SetUser("default", words(">new")); err != nil {
		t.Fatal(err)
	}
	if !r.RequirePassPinned() || r.Authenticate([]byte("default"), []byte("pw")) || !r.Authenticate([]byte("default"), []byte("new")) {
		t.Fatal("ACL password did not replace requirepass")
	}
	// Pinned travels with the users.
	r2 := mustNew(t, smallTable())
	r2.SetRequirePass("pw")
	if err := r2.Unmarshal(r.Marshal()); err != nil {
		t.Fatal(err)
	}
	if !r2.RequirePassPinned() || r2.Authenticate([]byte("default"), []byte("pw")) || !r2.Authenticate([]byte("default"), []byte("new")) {
		t.Fatal("restored users lost the pinned password")
	}
	// A file without the default user keeps requirepass; one with it pins.
	r3 := mustNew(t, smallTable())
	r3.SetRequirePass("pw")
	if err := r3.LoadFile("f", []byte("user a on nopass\n")); err != nil || r3.RequirePassPinned() || r3.DefaultNoPass() {
		t.Fatalf("load without default: err %v, pinned %v", err, r3.RequirePassPinned())
	}
	if err := r3.LoadFile("f", []byte("user default on nopass ~* +@all\n")); err != nil || !r3.RequirePassPinned() || !r3.DefaultNoPass() {
		t.Fatalf("load with default: err %v, pinned %v", err, r3.RequirePassPinned())
	}
}
