package acl

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestDefaultUser(t *testing.T) {
	r := mustNew(t, smallTable())
	got := string(r.AppendList(nil))
	want := "*1\r\n$34\r\nuser default on nopass ~* &* +@all\r\n"
	if got != want {
		t.Fatalf("ACL LIST = %q; want %q", got, want)
	}
	if !r.DefaultNoPass() {
		t.Fatal("default user should need no password")
	}
	r.SetRequirePass("pw")
	if r.DefaultNoPass() || !r.Authenticate([]byte("default"), []byte("pw")) || r.Authenticate([]byte("default"), []byte("x")) {
		t.Fatal("requirepass not applied")
	}
	r.SetRequirePass("")
	if !r.DefaultNoPass() {
		t.Fatal("empty requirepass should restore nopass")
	}
}

func TestCheck(t *testing.T) {
	r := mustNew(t, smallTable())
	if err := r.SetUser("u", words("on nopass ~k* %R~r* %W~w* &ch* +@read -get +config|get +select|0 +sadd +publish")); err != nil {
		t.Fatal(err)
	}
	k := func(key string, read, write bool) []KeyAccess {
		return []KeyAccess{{Key: []byte(key), Read: read, Write: write}}
	}
	cases := []struct {
		cmd, sub string
		keys     []KeyAccess
		want     string
	}{
		{"get", "", k("k1", true, false), "NOPERM User u has no permissions to run the 'get' command"},
		{"smembers", "", k("k1", true, false), ""},
		{"smembers", "", k("zz", true, false), "NOPERM No permissions to access a key"},
		{"smembers", "", k("r1", true, false), ""},
		{"smembers", "", k("w1", true, false), "NOPERM No permissions to access a key"},
		{"sadd", "", k("w1", false, true), ""},
		{"sadd", "", k("r1", false, true), "NOPERM No permissions to access a key"},
		{"exists", "", k("w1", false, false), ""},
		{"exists", "", k("zz", false, false), "NOPERM No permissions to access a key"},
		{"publish", "", []KeyAccess{{Key: []byte("ch1"), Channel: true}}, ""},
		{"publish", "", []KeyAccess{{Key: []byte("d"), Channel: true}}, "NOPERM No permissions to access a channel"},
		{"config", "get", nil, ""},
		{"config", "SET", nil, "NOPERM User u has no permissions to run the 'config|set' command"},
		{"select", "0", nil, ""},
		{"select", "1", nil, "NOPERM User u has no permissions to run the 'select' command"},
		{"auth", "", nil, ""},
		{"ping", "", nil, "NOPERM User u has no permissions to run the 'ping' command"},
	}
	for _, c := range cases {
		err := r.Check("u", c.cmd, c.sub, c.keys)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("Check(u, %s %s, %v) = %q; want %q", c.cmd, c.sub, c.keys, got, c.want)
		}
	}
	var d *DeniedError
	if err := r.Check("gone", "get", "", nil); !errors.As(err, &d) {
		t.Fatalf("unknown user: %v", err)
	}
}

func TestLogGroupsAndTrims(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	l := NewLog(3, func() time.Time { return now })
	ev := Event{Reason: ReasonKey, Context: "toplevel", Object: "k", Username: "u", ClientInfo: "a"}
	l.Add(ev)
	now = now.Add(30 * time.Second)
	ev.ClientInfo = "b"
	l.Add(ev)
	if e := l.Entries(10); len(e) != 1 || e[0].Count != 2 || e[0].ClientInfo != "b" || e[0].ID != 0 {
		t.Fatalf("grouped entries = %+v", e)
	}
	now = now.Add(61 * time.Second)
	l.Add(ev)
	for i := 0; i < 3; i++ {
		l.Add(Event{Reason: ReasonCommand, Context: "toplevel", Object: string(rune('a' + i)), Username: "u"})
	}
	e := l.Entries(10)
	if len(e) != 3 || e[0].Object != "c" || e[0].ID != 4 {
		t.Fatalf("trimmed entries = %+v", e)
	}
	got := string(l.AppendReply(nil, 1))
	want := "*1\r\n*20\r\n$5\r\ncount\r\n:1\r\n$6\r\nreason\r\n$7\r\ncommand\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n" +
		"$6\r\nobject\r\n$1\r\nc\r\n$8\r\nusername\r\n$1\r\nu\r\n$11\r\nage-seconds\r\n$1\r\n0\r\n" +
		"$11\r\nclient-info\r\n$0\r\n\r\n$8\r\nentry-id\r\n:4\r\n$17\r\ntimestamp-created\r\n:1700000091000\r\n" +
		"$22\r\ntimestamp-last-updated\r\n:1700000091000\r\n"
	if got != want {
		t.Fatalf("ACL LOG 1 =\n%q; want\n%q", got, want)
	}
	l.Reset()
	if len(l.Entries(10)) != 0 {
		t.Fatal("reset left entries")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	r := mustNew(t, smallTable())
	for _, rules := range []string{
		"on >a >b ~k* %R~r* %W~w* &c* +@read -get +config|get +select|0 +select|1",
		"off nopass allkeys allchannels +@all -@dangerous +keys",
		"on #" + hashPassword([]byte("x")) + " skip-sanitize-payload %R~",
	} {
		if err := r.SetUser("u"+string(rune('a'+len(r.Names()))), words(rules)); err != nil {
			t.Fatal(err)
		}
	}
	b := r.Marshal()
	r2 := mustNew(t, smallTable())
	if err := r2.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if b2 := r2.Marshal(); !bytes.Equal(b, b2) {
		t.Fatalf("round trip changed bytes:\n%q\n%q", b, b2)
	}
	if !bytes.Equal(r.FormatFile(), r2.FormatFile()) {
		t.Fatal("round trip changed the users")
	}
	if err := r2.Check("uc", "keys", "", nil); err != nil {
		t.Fatalf("restored user lost +keys: %v", err)
	}
	for _, bad := range [][]byte{nil, []byte("RSACL"), []byte("RSACL\x03"), append(b[:len(b)-1:len(b)-1], 'x'), append(append([]byte{}, b...), 0)} {
		if err := r2.Unmarshal(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Unmarshal(%q) = %v; want ErrCorrupt", bad, err)
		}
	}
}

func TestACLFile(t *testing.T) {
	r := mustNew(t, smallTable())
	if err := r.SetUser("alice", words("on >p ~a* +get")); err != nil {
		t.Fatal(err)
	}
	file := r.FormatFile()
	want := "user alice on #" + hashPassword([]byte("p")) + " ~a* resetchannels -@all +get\nuser default on nopass ~* &* +@all\n"
	if string(file) != want {
		t.Fatalf("FormatFile = %q; want %q", file, want)
	}
	r2 := mustNew(t, smallTable())
	if err := r2.LoadFile("users.acl", file); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r2.FormatFile(), file) {
		t.Fatalf("LoadFile(FormatFile) = %q", r2.FormatFile())
	}
	err := r2.LoadFile("users.acl", []byte("user bob on +nosuch foo ~x\nbad line\nuser bob\n"))
	wantErr := "users.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. " +
		"users.acl:1: Syntax error. users.acl:2 should start with user keyword followed by the username. " +
		"WARNING: Duplicate user 'bob' found on line 3. " +
		"WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
	if err == nil || err.Error() != wantErr {
		t.Fatalf("LoadFile(bad) = %v; want %s", err, wantErr)
	}
	if !bytes.Equal(r2.FormatFile(), file) {
		t.Fatal("a failed load changed the users")
	}
	if err := r2.LoadFile("users.acl", []byte("user carol on nopass +@all\n")); err != nil {
		t.Fatal(err)
	}
	if got := r2.Names(); len(got) != 2 || got[0] != "carol" || got[1] != "default" {
		t.Fatalf("users after load = %v", got)
	}
}

func FuzzUnmarshal(f *testing.F) {
	r := mustNew(f, smallTable())
	f.Add(r.Marshal())
	_ = r.SetUser("u", words("on >a ~k* %R~r* &c +@read -get +select|0 +config|get"))
	f.Add(r.Marshal())
	f.Add([]byte("RSACL\x01\x01\x07default\x05on ~*"))
	f.Add([]byte("RSACL\x02\x01\x01\x07default\x05on ~*"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := mustNew(t, smallTable())
		if err := r.Unmarshal(b); err != nil {
			return
		}
		m := r.Marshal()
		r2 := mustNew(t, smallTable())
		if err := r2.Unmarshal(m); err != nil {
			t.Fatalf("Unmarshal(Marshal()) = %v", err)
		}
		if m2 := r2.Marshal(); !bytes.Equal(m, m2) {
			t.Fatalf("Marshal not a fixpoint:\n%q\n%q", m, m2)
		}
	})
}
