package resp

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"raftset/internal/acl"
	"raftset/internal/command"
	"raftset/internal/testutil"
)

// Redis 7.0 words -NOPERM and ACL DRYRUN differently from 7.2, whose texts
// raftset answers; to72 rewrites 7.0's (as internal/acl's tests do).
var (
	noperm70Cmd = regexp.MustCompile(`^-NOPERM this user has no permissions to run the '([^']*)' command\r\n$`)
	dryrun70    = regexp.MustCompile(`^\$\d+\r\nThis user (has no permissions to (?:run|access) the '[^']*' (?:command|key|channel))\r\n$`)
)

func to72(reply, user string) string {
	switch reply {
	case "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n":
		return "-NOPERM No permissions to access a key\r\n"
	case "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n":
		return "-NOPERM No permissions to access a channel\r\n"
	}
	if m := noperm70Cmd.FindStringSubmatch(reply); m != nil {
		return "-NOPERM User " + user + " has no permissions to run the '" + m[1] + "' command\r\n"
	}
	if m := dryrun70.FindStringSubmatch(reply); m != nil {
		return bulk("User " + user + " " + m[1])
	}
	return reply
}

// TestACLEnforcementMatchesRedis runs the same users and commands on a
// front end and on redis-server 7.0, connection by connection, and compares
// every reply byte for byte (Redis's NOPERM wording mapped to 7.2's).
// Users are created through the store's write path, as the state machine
// applies them.
func TestACLEnforcementMatchesRedis(t *testing.T) {
	redis := testutil.StartRedis(t)
	_, addr := startServer(t, Config{}, newFakeStore())
	conns := map[string][2]*testConn{}
	conn := func(name string) [2]*testConn {
		if c, ok := conns[name]; ok {
			return c
		}
		c := [2]*testConn{dial(t, addr), dial(t, redis.Addr)}
		conns[name] = c
		return c
	}
	// who is the connection; user is whom the 7.0 texts are mapped for.
	steps := []struct {
		who, user string
		args      string
	}{
		{"admin", "default", "ACL SETUSER alice on >pa ~app:* %R~ro:* %W~wo:* &news* +@read +@set -smembers +set +multi +exec +publish"},
		{"admin", "default", "ACL SETUSER bob on >pb allkeys +@all -@dangerous -set"},
		{"admin", "default", "ACL SETUSER carol off >pc +@all ~*"},
		{"admin", "default", "ACL SETUSER dave on nopass ~* +get +config|get +client|id"},
		{"admin", "default", "ACL SETUSER erin on >pe +@all ~* -@all"},
		{"admin", "default", "ACL SETUSER bad on +nosuch"},
		{"admin", "default", "ACL SETUSER bad on ~x allkeys ~y"},
		{"admin", "default", "AUTH x"},
		{"admin", "default", "ACL USERS"},

		{"alice", "alice", "GET app:1"},
		{"alice", "alice", "AUTH alice wrong"},
		{"alice", "alice", "AUTH nobody pa"},
		{"alice", "alice", "AUTH alice pa"},
		{"alice", "alice", "ACL WHOAMI"},
		{"alice", "alice", "SADD app:1 x"},
		{"alice", "alice", "SADD other x"},
		{"alice", "alice", "SMEMBERS app:1"},
		{"alice", "alice", "SISMEMBER app:1 x"},
		{"alice", "alice", "SCARD ro:1"},
		{"alice", "alice", "GET ro:1"},
		{"alice", "alice", "SET ro:1 v"},
		{"alice", "alice", "SET wo:1 v"},
		{"alice", "alice", "GET wo:1"},
		{"alice", "alice", "SET wo:2 v GET"},
		{"alice", "alice", "EXISTS ro:x wo:x"},
		{"alice", "alice", "EXISTS app:1 zzz"},
		{"alice", "alice", "DEL app:1"},
		{"alice", "alice", "PUBLISH news1 hi"},
		{"alice", "alice", "PUBLISH sports hi"},
		{"alice", "alice", "CONFIG GET maxclients"},
		{"alice", "alice", "PING"},
		{"alice", "alice", "MULTI"},
		{"alice", "alice", "SADD app:2 y"},
		{"alice", "alice", "SADD other y"},
		{"alice", "alice", "EXEC"},
		{"alice", "alice", "MULTI"},
		{"alice", "alice", "SADD app:3 z"},
		{"alice", "alice", "SISMEMBER app:3 z"},
		{"alice", "alice", "EXEC"},
		{"alice", "alice", "AUTH carol pc"},
		{"alice", "alice", "ACL WHOAMI"},

		{"bob", "bob", "HELLO 2 AUTH bob wrong"},
		{"bob", "bob", "HELLO 2 AUTH nobody pb"},
		{"bob", "bob", "AUTH bob pb"},
		{"bob", "bob", "ACL WHOAMI"},
		{"bob", "bob", "SET k v"},
		{"bob", "bob", "SADD any:key m"},
		{"bob", "bob", "FLUSHALL"},
		{"bob", "bob", "KEYS *"},
		{"bob", "bob", "ACL SETUSER bob +set"},
		{"bob", "bob", "CONFIG SET maxclients 10"},

		{"dave", "dave", "AUTH dave anything"},
		{"dave", "dave", "GET app:1"},
		{"dave", "dave", "CONFIG GET maxclients"},
		{"dave", "dave", "CONFIG SET maxclients 10"},
		{"dave", "dave", "CLIENT GETNAME"},

		{"erin", "erin", "AUTH erin pe"},
		{"erin", "erin", "GET x"},
		{"erin", "erin", "QUIT"},

		{"admin", "alice", "ACL DRYRUN alice GET app:1"},
		{"admin", "alice", "ACL DRYRUN alice SET other v"},
		{"admin", "alice", "ACL DRYRUN alice DEL x"},
		{"admin", "alice", "ACL DRYRUN alice PUBLISH sports x"},
		{"admin", "alice", "ACL DRYRUN alice CONFIG GET x"},
		{"admin", "alice", "ACL DRYRUN alice GET"},
		{"admin", "alice", "ACL DRYRUN alice NOSUCH"},
		{"admin", "alice", "ACL DRYRUN nobody GET x"},
		{"admin", "default", "ACL DELUSER dave nobody"},
		{"admin", "default", "ACL DELUSER default"},
		{"admin", "default", "ACL USERS"},
		{"admin", "default", "ACL CAT nosuch"},
		{"admin", "default", "ACL LOAD"},
		{"admin", "default", "ACL SAVE"},
	}
	for _, st := range steps {
		args := strings.Fields(st.args)
		c := conn(st.who)
		ours := c[0].do(args...)
		theirs := to72(c[1].do(args...), st.user)
		if ours != theirs {
			t.Errorf("%s: %s = %q; redis-server %q", st.who, st.args, ours, theirs)
		}
		if args[0] == "QUIT" {
			delete(conns, st.who)
		}
	}
	// dave was deleted: Redis closes his connection.
	c := conn("dave")
	for i, tc := range c {
		tc.send(enc("PING"))
		if rest, err := readToEOF(tc); err != nil || rest != "" {
			t.Errorf("connection of a deleted user (%s): read %q, %v; want EOF", []string{"raftset", "redis"}[i], rest, err)
		}
	}
}

func readToEOF(tc *testConn) (string, error) {
	_ = tc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := tc.r.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset") {
				return b.String(), nil
			}
			return b.String(), err
		}
	}
}

// HELLO 2 AUTH authenticates as the user (the reply itself names the
// server, so it is not compared with redis-server's).
func TestHelloAuthUser(t *testing.T) {
	_, addr := startServer(t, Config{RequirePass: "pw"}, newFakeStore())
	admin, c := dial(t, addr), dial(t, addr)
	admin.do("AUTH", "pw")
	admin.do("ACL", "SETUSER", "hank", "on", ">ph", "+acl|whoami", "+get", "~*")
	if got := c.do("HELLO", "2", "AUTH", "hank", "ph"); !strings.HasPrefix(got, "*14\r\n") {
		t.Fatalf("HELLO 2 AUTH hank ph = %q", got)
	}
	if got := c.do("ACL", "WHOAMI") + c.do("SET", "k", "v"); got != bulk("hank")+errr("NOPERM User hank has no permissions to run the 'set' command") {
		t.Errorf("after HELLO AUTH: ACL WHOAMI, SET = %q", got)
	}
}

// A queued command whose rights went away before EXEC is answered in
// EXEC's array with Redis's text; the others run.
func TestACLRecheckedAtExec(t *testing.T) {
	redis := testutil.StartRedis(t)
	_, addr := startServer(t, Config{}, newFakeStore())
	for _, a := range []string{addr, redis.Addr} {
		admin, w := dial(t, a), dial(t, a)
		admin.do("ACL", "SETUSER", "w", "on", ">p", "+@all", "~*")
		w.do("AUTH", "w", "p")
		got := w.do("MULTI") + w.do("GET", "k") + w.do("SET", "k", "1")
		admin.do("ACL", "SETUSER", "w", "-get")
		got += w.do("EXEC")
		want := ok + queuedR + queuedR + array(errr("NOPERM ACLs rules changed between the moment the transaction was accumulated "+
			"and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand"), ok)
		if got != want {
			t.Errorf("%s: MULTI GET SET (rights changed) EXEC = %q; want %q", a, got, want)
		}
	}
}

// Denials and failed AUTHs reach the node's ACL LOG with Redis's fields.
func TestACLLog(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	admin, u := dial(t, addr), dial(t, addr)
	admin.do("ACL", "SETUSER", "u", "on", ">p", "+get", "~a*")
	u.do("AUTH", "u", "wrong")
	u.do("AUTH", "u", "p")
	u.do("GET", "b")
	u.do("GET", "b")
	u.do("SET", "a", "1")
	r := admin.do("ACL", "LOG")
	for _, want := range []string{
		"*3\r\n*20\r\n" + bulk("count") + integer(1) + bulk("reason") + bulk("command") + bulk("context") + bulk("toplevel") +
			bulk("object") + bulk("set") + bulk("username") + bulk("u"),
		bulk("reason") + bulk("key") + bulk("context") + bulk("toplevel") + bulk("object") + bulk("b") + bulk("username") + bulk("u"),
		bulk("count") + integer(2),
		bulk("reason") + bulk("auth") + bulk("context") + bulk("toplevel") + bulk("object") + bulk("AUTH") + bulk("username") + bulk("u"),
		"user=u",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("ACL LOG = %q\nlacks %q", r, want)
		}
	}
	if got := admin.do("ACL", "LOG", "RESET") + admin.do("ACL", "LOG"); got != ok+"*0\r\n" {
		t.Errorf("ACL LOG RESET; ACL LOG = %q", got)
	}
	if got := admin.do("CLIENT", "LIST"); !strings.Contains(got, " user=u ") || !strings.Contains(got, " user=default ") {
		t.Errorf("CLIENT LIST does not name the users: %q", got)
	}
}

// requirepass is the default user's password until ACL sets it: from then
// on the ACL password counts and requirepass is ignored.
func TestRequirePassAndACL(t *testing.T) {
	f := newFakeStore()
	_, addr := startServer(t, Config{RequirePass: "pw"}, f)
	c := dial(t, addr)
	if got := c.do("GET", "k"); got != errr(command.ErrNoAuth) {
		t.Fatalf("GET before AUTH = %q", got)
	}
	if got := c.do("AUTH", "pw") + c.do("ACL", "LIST"); got != ok+bulks("user default on #"+sha256hex("pw")+" ~* &* +@all") {
		t.Errorf("AUTH pw; ACL LIST = %q", got)
	}
	if got := c.do("ACL", "SETUSER", "default", "resetpass", ">new"); got != ok {
		t.Fatalf("ACL SETUSER default >new = %q", got)
	}
	c2 := dial(t, addr)
	if got := c2.do("AUTH", "pw") + c2.do("AUTH", "default", "new"); got != errr(command.ErrWrongPass)+ok {
		t.Errorf("AUTH requirepass, AUTH default new = %q", got)
	}
	if got := c2.do("CONFIG", "SET", "requirepass", "other") + dial(t, addr).do("AUTH", "other"); got != ok+errr(command.ErrWrongPass) {
		t.Errorf("CONFIG SET requirepass after ACL pinned the password: %q", got)
	}
	if !f.users.RequirePassPinned() {
		t.Error("the store's users do not say the password is pinned")
	}
}

func sha256hex(s string) string {
	r, _ := acl.New(acl.TableCommands(command.Commands()), globMatch)
	_ = r.SetUser("x", [][]byte{[]byte(">" + s)})
	u, _ := r.User("x")
	d := u.Describe()
	return d[strings.Index(d, "#")+1:][:64]
}

// ACL LOAD proposes the aclfile's contents through the store's write path;
// ACL SAVE writes this node's users to it.
func TestACLFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "users.acl")
	f := newFakeStore()
	_, addr := startServer(t, Config{ACLFile: file}, f)
	c := dial(t, addr)
	if got := c.do("ACL", "LOAD"); got != errr("ERR Error loading ACLs, opening file '"+file+"': No such file or directory") {
		t.Errorf("ACL LOAD without the file = %q", got)
	}
	if err := os.WriteFile(file, []byte("user zed on nopass ~* +@all\nuser default on nopass ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := c.do("ACL", "LOAD") + c.do("ACL", "USERS"); got != ok+bulks("default", "zed") {
		t.Errorf("ACL LOAD; ACL USERS = %q", got)
	}
	f.mu.Lock()
	kinds := len(f.writes)
	f.mu.Unlock()
	if kinds == 0 {
		t.Error("ACL LOAD did not go through the store's write path")
	}
	if err := os.WriteFile(file, []byte("user x on +nosuch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := c.do("ACL", "LOAD"); got != errr("ERR "+file+":1: Error in applying operation '+nosuch': Unknown command or category name in ACL. "+
		"WARNING: ACL errors detected, no change to the previously active ACL rules was performed") {
		t.Errorf("ACL LOAD of a bad file = %q", got)
	}
	c.do("ACL", "SETUSER", "amy", "on", ">p", "+get")
	if got := c.do("ACL", "SAVE"); got != ok {
		t.Fatalf("ACL SAVE = %q", got)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := "user amy on #" + sha256hex("p") + " resetchannels -@all +get\nuser default on nopass ~* resetchannels +@all\nuser zed on nopass ~* resetchannels +@all\n"
	if string(b) != want {
		t.Errorf("ACL SAVE wrote %q; want %q", b, want)
	}
}

// benchACLCheck measures the check every command passes, for a user
// allowed everything (the fast path: the default user, normally) and for
// one with command and key rules.
func benchACLCheck(b *testing.B, user string) {
	s := NewServer(Config{Logger: newTestLogger(b)}, newFakeStore())
	if err := s.acl.users.SetUser("r", [][]byte{[]byte("on"), []byte("+@read"), []byte("~k*"), []byte("%W~w*")}); err != nil {
		b.Fatal(err)
	}
	c := &client{s: s, user: user}
	spec := s.table.Lookup([]byte("sismember"))
	args := [][]byte{[]byte("SISMEMBER"), []byte("k:000000012345"), []byte("000000054321")}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if msg, _ := c.aclCheck(spec, args, "toplevel"); msg != "" {
			b.Fatal(msg)
		}
	}
}

func BenchmarkACLCheckUnrestricted(b *testing.B) { benchACLCheck(b, "default") }
func BenchmarkACLCheckRestricted(b *testing.B)   { benchACLCheck(b, "r") }
