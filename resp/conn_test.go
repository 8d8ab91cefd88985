package resp

import (
	"strconv"
	"strings"
	"testing"

	"raftset/internal/command"
)

// step is one exchange: raw bytes sent (commands via enc) and the exact
// bytes expected back.
type step struct {
	send []string // one command
	want string
}

func cmd(args ...string) []string { return args }

func runSteps(t *testing.T, tc *testConn, steps []step) {
	t.Helper()
	for _, st := range steps {
		if got := tc.do(st.send...); got != st.want {
			t.Errorf("%q = %q, want %q", st.send, got, st.want)
		}
	}
}

func TestConnectionCommands(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"ping", []step{
			{cmd("PING"), "+PONG\r\n"},
			{cmd("ping", "hello world"), bulk("hello world")},
			{cmd("PING", "a", "b"), errr("ERR wrong number of arguments for 'ping' command")},
		}},
		{"echo", []step{
			{cmd("ECHO", "x\r\ny"), bulk("x\r\ny")},
			{cmd("echo", ""), bulk("")},
			{cmd("ECHO"), errr("ERR wrong number of arguments for 'echo' command")},
		}},
		{"reset", []step{
			{cmd("CLIENT", "SETNAME", "n"), ok},
			{cmd("READONLY"), ok},
			{cmd("MULTI"), ok},
			{cmd("RESET"), "+RESET\r\n"},
			{cmd("EXEC"), errr("ERR EXEC without MULTI")},
			{cmd("CLIENT", "GETNAME"), "$-1\r\n"},
			{cmd("SUBSCRIBE", "ch"), "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"},
			{cmd("RESET"), "+RESET\r\n"},
			{cmd("PING"), "+PONG\r\n"},
			{cmd("RESET", "x"), errr("ERR wrong number of arguments for 'reset' command")},
		}},
		{"select", []step{
			{cmd("SELECT", "0"), ok},
			{cmd("SELECT", "1"), errr("ERR DB index is out of range")},
			{cmd("SELECT", "-1"), errr("ERR DB index is out of range")},
			{cmd("SELECT", "x"), errr("ERR value is not an integer or out of range")},
			{cmd("SELECT", "01"), errr("ERR value is not an integer or out of range")},
			{cmd("SELECT", "99999999999"), errr("ERR value is not an integer or out of range")},
			{cmd("SELECT"), errr("ERR wrong number of arguments for 'select' command")},
		}},
		{"hello errors", []step{
			{cmd("HELLO", "4"), errr("NOPROTO unsupported protocol version")},
			{cmd("HELLO", "1"), errr("NOPROTO unsupported protocol version")},
			{cmd("HELLO", "x"), errr("ERR Protocol version is not an integer or out of range")},
			{cmd("HELLO", "2", "foo"), errr("ERR Syntax error in HELLO option 'foo'")},
			{cmd("HELLO", "2", "AUTH", "default"), errr("ERR Syntax error in HELLO option 'AUTH'")},
			{cmd("HELLO", "2", "SETNAME", "a b"), errr("ERR Client names cannot contain spaces, newlines or special characters.")},
			{cmd("HELLO", "2", "AUTH", "bob", "x"), errr(command.ErrWrongPass)},
		}},
		{"auth without password", []step{
			{cmd("AUTH", "x"), errr("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")},
			{cmd("AUTH", "default", "anything"), ok},
			{cmd("AUTH", "bob", "x"), errr("WRONGPASS invalid username-password pair or user is disabled.")},
			{cmd("AUTH", "a", "b", "c"), errr("ERR syntax error")},
			{cmd("AUTH"), errr("ERR wrong number of arguments for 'auth' command")},
		}},
		{"client", []step{
			{cmd("CLIENT", "GETNAME"), null},
			{cmd("CLIENT", "SETNAME", "conn-1"), ok},
			{cmd("client", "getname"), bulk("conn-1")},
			{cmd("CLIENT", "SETNAME", "a b"), errr("ERR Client names cannot contain spaces, newlines or special characters.")},
			{cmd("CLIENT", "SETNAME", ""), ok},
			{cmd("CLIENT", "GETNAME"), null},
			{cmd("CLIENT", "SETINFO", "LIB-NAME", "go-redis(,go1.26)"), ok},
			{cmd("CLIENT", "SETINFO", "lib-ver", "9.7.0"), ok},
			{cmd("CLIENT", "SETINFO", "lib-name", "a b"), errr("ERR lib-name cannot contain spaces, newlines or special characters.")},
			{cmd("CLIENT", "SETINFO", "foo", "x"), errr("ERR Unrecognized option 'foo'")},
			{cmd("CLIENT", "NOSUCH", "x"), errr("ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.")},
			{cmd("client"), errr("ERR wrong number of arguments for 'client' command")},
			{cmd("CLIENT", "SETNAME"), errr("ERR wrong number of arguments for 'client|setname' command")},
			{cmd("CLIENT", "LIST", "TYPE", "foo"), errr("ERR Unknown client type 'foo'")},
			{cmd("CLIENT", "LIST", "ID", "x"), errr("ERR Invalid client ID")},
			{cmd("CLIENT", "LIST", "ID", "999999"), bulk("")},
			{cmd("CLIENT", "LIST", "TYPE", "pubsub"), bulk("")},
			{cmd("CLIENT", "LIST", "foo"), errr("ERR syntax error")},
		}},
		{"readonly", []step{
			{cmd("READONLY"), ok},
			{cmd("READWRITE"), ok},
			{cmd("READONLY", "x"), errr("ERR wrong number of arguments for 'readonly' command")},
		}},
		{"unknown and arity", []step{
			{cmd("FOO"), errr("ERR unknown command 'FOO', with args beginning with: ")},
			{cmd("foo", "a", "b"), errr("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")},
			{cmd("foo", strings.Repeat("a", 200), "b"), errr("ERR unknown command 'foo', with args beginning with: '" + strings.Repeat("a", 128) + "' ")},
			{cmd("foo", "a\r\nb"), errr("ERR unknown command 'foo', with args beginning with: 'a  b' ")},
			{cmd("GET"), errr("ERR wrong number of arguments for 'get' command")},
			{cmd("SADD", "k"), errr("ERR wrong number of arguments for 'sadd' command")},
			{cmd("scard", "a", "b"), errr("ERR wrong number of arguments for 'scard' command")},
			{cmd("OBJECT"), errr("ERR wrong number of arguments for 'object' command")},
			{cmd("OBJECT", "ENCODING"), errr("ERR wrong number of arguments for 'object|encoding' command")},
			{cmd("Object", "foo", "bar"), errr("ERR unknown subcommand 'foo'. Try OBJECT HELP.")},
			{cmd("config", "get"), errr("ERR wrong number of arguments for 'config|get' command")},
			{cmd("command", "foo"), errr("ERR unknown subcommand 'foo'. Try COMMAND HELP.")},
			{cmd("PING"), "+PONG\r\n"},
		}},
		{"wrong type keeps the connection", []step{
			{cmd("SET", "s", "x"), ok},
			{cmd("SADD", "s", "a"), errr(command.ErrWrongType)},
			{cmd("INCR", "s"), errr(command.ErrNotInteger)},
			{cmd("GET", "s"), bulk("x")},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, dial(t, addr), tt.steps)
		})
	}
}

func TestHello(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	tc := dial(t, addr)
	idReply := tc.do("CLIENT", "ID")
	id, err := strconv.ParseInt(strings.TrimSpace(idReply[1:]), 10, 64)
	if err != nil || id < 1 {
		t.Fatalf("CLIENT ID = %q", idReply)
	}
	want := array(bulk("server"), bulk("redis"), bulk("version"), bulk("7.2.0"), bulk("proto"), integer(2),
		bulk("id"), integer(id), bulk("mode"), bulk("standalone"), bulk("role"), bulk("master"),
		bulk("modules"), "*0\r\n")
	runSteps(t, tc, []step{
		{cmd("HELLO"), want},
		{cmd("HELLO", "2"), want},
		{cmd("HELLO", "2", "AUTH", "default", "x", "SETNAME", "bob"), want},
		{cmd("CLIENT", "GETNAME"), bulk("bob")},
	})
}

func TestQuit(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	tc := dial(t, addr)
	tc.send(enc("SADD", "k", "a") + enc("QUIT") + enc("PING"))
	if got := tc.replies(2); got != ":1\r\n"+ok {
		t.Errorf("SADD, QUIT = %q", got)
	}
	tc.expectEOF()
}

func TestTime(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	got := dial(t, addr).do("TIME")
	parts := strings.Split(got, "\r\n")
	// *2, $n, secs, $n, usecs, ""
	if len(parts) != 6 || parts[0] != "*2" {
		t.Fatalf("TIME = %q", got)
	}
	secs, err1 := strconv.ParseInt(parts[2], 10, 64)
	usecs, err2 := strconv.ParseInt(parts[4], 10, 64)
	if err1 != nil || err2 != nil || secs < 1700000000 || usecs < 0 || usecs > 999999 {
		t.Errorf("TIME = %q", got)
	}
}

func TestAuth(t *testing.T) {
	s, addr := startServer(t, Config{RequirePass: "secret"}, newFakeStore())
	tc := dial(t, addr)
	runSteps(t, tc, []step{
		{cmd("PING"), errr("NOAUTH Authentication required.")},
		{cmd("SADD", "k", "a"), errr("NOAUTH Authentication required.")},
		{cmd("MULTI"), errr("NOAUTH Authentication required.")},
		{cmd("FOO"), errr("ERR unknown command 'FOO', with args beginning with: ")},
		{cmd("GET"), errr("ERR wrong number of arguments for 'get' command")},
		{cmd("AUTH", "wrong"), errr(command.ErrWrongPass)},
		{cmd("AUTH", "bob", "secret"), errr(command.ErrWrongPass)},
		{cmd("HELLO", "2"), errr(errHelloNoAuth)},
		{cmd("HELLO", "4"), errr("NOPROTO unsupported protocol version")},
		{cmd("HELLO", "2", "AUTH", "default", "bad"), errr(command.ErrWrongPass)},
		{cmd("PING"), errr("NOAUTH Authentication required.")},
		{cmd("AUTH", "secret"), ok},
		{cmd("PING"), "+PONG\r\n"},
		{cmd("AUTH", "wrong"), errr(command.ErrWrongPass)},
		{cmd("PING"), "+PONG\r\n"}, // a failed AUTH does not log out
	})
	tc2 := dial(t, addr)
	runSteps(t, tc2, []step{
		{cmd("AUTH", "default", "secret"), ok},
		{cmd("SADD", "k", "a"), ":1\r\n"},
	})
	tc3 := dial(t, addr)
	if got := tc3.do("HELLO", "2", "AUTH", "default", "secret"); !strings.HasPrefix(got, "*14\r\n$6\r\nserver\r\n") {
		t.Errorf("HELLO 2 AUTH = %q", got)
	}
	runSteps(t, tc3, []step{{cmd("SCARD", "k"), ":1\r\n"}})

	// Changing the password at run time: connections already in stay in.
	runSteps(t, tc3, []step{{cmd("CONFIG", "SET", "requirepass", "other"), ok}})
	runSteps(t, tc, []step{{cmd("PING"), "+PONG\r\n"}})
	tc4 := dial(t, addr)
	runSteps(t, tc4, []step{
		{cmd("PING"), errr("NOAUTH Authentication required.")},
		{cmd("AUTH", "secret"), errr(command.ErrWrongPass)},
		{cmd("AUTH", "other"), ok},
		{cmd("CONFIG", "SET", "requirepass", ""), ok},
	})
	tc5 := dial(t, addr)
	runSteps(t, tc5, []step{{cmd("PING"), "+PONG\r\n"}})
	_ = s
}

func TestAuthFramingLimits(t *testing.T) {
	_, addr := startServer(t, Config{RequirePass: "secret"}, newFakeStore())
	args := []string{"SADD", "k"}
	for i := range 10 {
		args = append(args, strconv.Itoa(i))
	}
	big := enc(args...) // 12 arguments

	// Before AUTH: more than 10 arguments are refused, and so are bulks
	// over 16 KiB.
	tc := dial(t, addr)
	tc.send(big)
	if got := tc.reply(); got != errr("ERR Protocol error: unauthenticated multibulk length") {
		t.Errorf("big command before AUTH = %q", got)
	}
	tc.expectEOF()
	tc = dial(t, addr)
	tc.send("*1\r\n$16385\r\n")
	if got := tc.reply(); got != errr("ERR Protocol error: unauthenticated bulk length") {
		t.Errorf("big bulk before AUTH = %q", got)
	}
	tc.expectEOF()

	// AUTH pipelined with a big command: the AUTH runs first.
	for _, auth := range []string{enc("AUTH", "secret"), "auth secret\r\n", enc("hello", "2", "auth", "default", "secret")} {
		tc = dial(t, addr)
		tc.send(auth + big + enc("PING"))
		first := tc.reply()
		if first != ok && !strings.HasPrefix(first, "*14\r\n") {
			t.Errorf("%q = %q", auth, first)
		}
		if got := tc.replies(2); got != ":10\r\n+PONG\r\n" && got != ":0\r\n+PONG\r\n" {
			t.Errorf("%q then SADD, PING = %q", auth, got)
		}
	}
	// A failed AUTH keeps the limits.
	tc = dial(t, addr)
	tc.send(enc("AUTH", "wrong") + big)
	if got := tc.replies(2); got != errr(command.ErrWrongPass)+errr("ERR Protocol error: unauthenticated multibulk length") {
		t.Errorf("wrong AUTH then big command = %q", got)
	}
	tc.expectEOF()
}

func TestMulti(t *testing.T) {
	store := newFakeStore()
	_, addr := startServer(t, Config{}, store)
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"exec", []step{
			{cmd("MULTI"), ok},
			{cmd("SET", "a", "1"), queuedR},
			{cmd("INCR", "a"), queuedR},
			{cmd("GET", "a"), queuedR},
			{cmd("EXEC"), array(ok, integer(2), bulk("2"))},
		}},
		{"nested multi and watch inside", []step{
			{cmd("MULTI"), ok},
			{cmd("MULTI"), errr("ERR MULTI calls can not be nested")},
			{cmd("WATCH", "a"), errr("ERR WATCH inside MULTI is not allowed")},
			{cmd("EXEC"), "*0\r\n"},
		}},
		{"without multi", []step{
			{cmd("EXEC"), errr("ERR EXEC without MULTI")},
			{cmd("DISCARD"), errr("ERR DISCARD without MULTI")},
			{cmd("EXEC", "x"), errr("ERR wrong number of arguments for 'exec' command")},
		}},
		{"execabort unknown", []step{
			{cmd("MULTI"), ok},
			{cmd("SET", "b", "1"), queuedR},
			{cmd("NOSUCH"), errr("ERR unknown command 'NOSUCH', with args beginning with: ")},
			{cmd("EXEC"), errr("EXECABORT Transaction discarded because of previous errors.")},
			{cmd("GET", "b"), null},
			{cmd("EXEC"), errr("ERR EXEC without MULTI")},
		}},
		{"execabort arity", []step{
			{cmd("MULTI"), ok},
			{cmd("GET"), errr("ERR wrong number of arguments for 'get' command")},
			{cmd("EXEC"), errr("EXECABORT Transaction discarded because of previous errors.")},
		}},
		{"not allowed inside", []step{
			{cmd("MULTI"), ok},
			{cmd("SAVE"), errr("ERR Command not allowed inside a transaction")},
			{cmd("AUTH", "x"), errr("ERR Command not allowed inside a transaction")},
			{cmd("EXEC"), errr("EXECABORT Transaction discarded because of previous errors.")},
		}},
		{"discard", []step{
			{cmd("MULTI"), ok},
			{cmd("SET", "c", "1"), queuedR},
			{cmd("DISCARD"), ok},
			{cmd("GET", "c"), null},
		}},
		{"local commands inside", []step{
			{cmd("MULTI"), ok},
			{cmd("PING"), queuedR},
			{cmd("ECHO", "x"), queuedR},
			{cmd("UNWATCH"), queuedR},
			{cmd("SELECT", "1"), queuedR},
			{cmd("EXEC"), array("+PONG\r\n", bulk("x"), ok, errr("ERR DB index is out of range"))},
		}},
		{"local and data commands inside", []step{
			{cmd("MULTI"), ok},
			{cmd("SADD", "s", "a", "b"), queuedR},
			{cmd("PING", "p"), queuedR},
			{cmd("SMEMBERS", "s"), queuedR},
			{cmd("LASTSAVE"), queuedR},
			{cmd("EXEC"), array(integer(2), bulk("p"), bulks("a", "b"), integer(1700000000))},
		}},
		{"errors at exec time stay in the array", []step{
			{cmd("MULTI"), ok},
			{cmd("SET", "str", "x"), queuedR},
			{cmd("SADD", "str", "a"), queuedR},
			{cmd("GET", "str"), queuedR},
			{cmd("EXEC"), array(ok, errr(command.ErrWrongType), bulk("x"))},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, dial(t, addr), tt.steps)
		})
	}

	// EXEC reaches the store as one OpTx.
	store.mu.Lock()
	store.kinds = nil
	store.mu.Unlock()
	tc := dial(t, addr)
	tc.send(enc("MULTI") + enc("SADD", "t", "a") + enc("SADD", "t", "b") + enc("EXEC"))
	if got := tc.replies(4); got != ok+queuedR+queuedR+array(integer(1), integer(1)) {
		t.Errorf("MULTI SADD SADD EXEC = %q", got)
	}
	store.mu.Lock()
	kinds := store.kinds
	store.mu.Unlock()
	if len(kinds) != 1 || len(kinds[0]) != 1 || kinds[0][0] != command.OpTx {
		t.Errorf("Write calls = %v, want one call with one OpTx", kinds)
	}
}

func TestWatch(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	a, b := dial(t, addr), dial(t, addr)
	runSteps(t, a, []step{
		{cmd("SET", "w", "1"), ok},
		{cmd("WATCH", "w", "other"), ok},
		{cmd("MULTI"), ok},
		{cmd("SET", "w", "3"), queuedR},
	})
	runSteps(t, b, []step{{cmd("SET", "w", "2"), ok}})
	runSteps(t, a, []step{
		{cmd("EXEC"), "*-1\r\n"},
		{cmd("GET", "w"), bulk("2")},
		// The failed EXEC forgot the watches.
		{cmd("MULTI"), ok},
		{cmd("SET", "w", "4"), queuedR},
		{cmd("EXEC"), array(ok)},
		// Unchanged watched keys let EXEC run.
		{cmd("WATCH", "w"), ok},
		{cmd("WATCH", "w"), ok},
		{cmd("MULTI"), ok},
		{cmd("INCR", "w"), queuedR},
		{cmd("EXEC"), array(integer(5))},
		// UNWATCH forgets.
		{cmd("WATCH", "w"), ok},
		{cmd("UNWATCH"), ok},
	})
	runSteps(t, b, []step{{cmd("SET", "w", "9"), ok}})
	runSteps(t, a, []step{
		{cmd("MULTI"), ok},
		{cmd("GET", "w"), queuedR},
		{cmd("EXEC"), array(bulk("9"))},
		// DISCARD forgets too.
		{cmd("WATCH", "w"), ok},
		{cmd("MULTI"), ok},
		{cmd("DISCARD"), ok},
	})
	runSteps(t, b, []step{{cmd("SET", "w", "10"), ok}})
	runSteps(t, a, []step{
		{cmd("MULTI"), ok},
		{cmd("GET", "w"), queuedR},
		{cmd("EXEC"), array(bulk("10"))},
		{cmd("WATCH"), errr("ERR wrong number of arguments for 'watch' command")},
	})
}
