package resp

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"

	"raftset/internal/command"
	"raftset/internal/respwire"
)

func TestInfo(t *testing.T) {
	_, addr := startServer(t, Config{Version: "0.1.0"}, newFakeStore())
	tc := dial(t, addr)
	tc.do("SADD", "k", "a")

	all := tc.do("INFO")
	body := all[strings.Index(all, "\r\n")+2 : len(all)-2]
	var order []string
	for _, line := range strings.Split(body, "\r\n") {
		if strings.HasPrefix(line, "# ") {
			order = append(order, line[2:])
		}
	}
	if got, want := strings.Join(order, ","), "Server,Clients,Memory,Stats,Replication,CPU,Errorstats,Cluster,Raft,Keyspace"; got != want {
		t.Errorf("INFO sections = %s, want %s", got, want)
	}
	for _, want := range []string{
		"# Server\r\nredis_version:7.2.0\r\nraftset_version:0.1.0\r\n",
		"\r\nredis_mode:standalone\r\n",
		"\r\narch_bits:64\r\n",
		"\r\n\r\n# Clients\r\nconnected_clients:1\r\n",
		"\r\ntotal_connections_received:1\r\n",
		"\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n",
		"\r\nrole:master\r\n",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("INFO lacks %q:\n%s", want, all)
		}
	}
	if !strings.HasSuffix(body, "\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n") {
		t.Errorf("INFO ends with %q", body[max(0, len(body)-40):])
	}
	if n := len(regexp.MustCompile(`\r\nrun_id:[0-9a-f]{40}\r\n`).FindAllString(all, -1)); n != 1 {
		t.Errorf("INFO has %d run_id lines", n)
	}

	server := tc.do("info", "SERVER")
	if !strings.Contains(server, "# Server\r\n") || strings.Contains(server, "# Clients") {
		t.Errorf("INFO server = %q", server)
	}
	two := tc.do("INFO", "keyspace", "clients")
	if !strings.Contains(two, "# Clients\r\n") || !strings.Contains(two, "\r\n\r\n# Keyspace\r\n") || strings.Contains(two, "# Server") {
		t.Errorf("INFO keyspace clients = %q", two)
	}
	if got := tc.do("INFO", "nosuch"); got != "$0\r\n\r\n" {
		t.Errorf("INFO nosuch = %q", got)
	}
	stats := tc.do("INFO", "stats")
	m := regexp.MustCompile(`total_commands_processed:(\d+)\r\n`).FindStringSubmatch(stats)
	if m == nil || m[1] == "0" {
		t.Errorf("INFO stats = %q", stats)
	}
}

func TestConfig(t *testing.T) {
	store := newFakeStore()
	s, addr := startServer(t, Config{}, store)
	dir := "/data"
	s.RegisterConfig("dir", func() string { return dir }, func(v string) error {
		if v == "" {
			return errors.New("empty path")
		}
		dir = v
		return nil
	})
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	tc := dial(t, addr)
	runSteps(t, tc, []step{
		{cmd("CONFIG", "GET", "port"), bulks("port", port)},
		{cmd("CONFIG", "GET", "PORT", "bind"), bulks("bind", "127.0.0.1", "port", port)},
		{cmd("CONFIG", "GET", "*max*"), bulks("maxclients", "10000", "proto-max-bulk-len", "536870912", "slowlog-max-len", "128",
			"set-max-intset-entries", "512", "set-max-listpack-entries", "128")},
		{cmd("CONFIG", "GET", "set-max-intset-entries"), bulks("set-max-intset-entries", "512")},
		{cmd("CONFIG", "GET", "nosuch"), "*0\r\n"},
		{cmd("CONFIG", "SET", "maxclients", "x"), errr("ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer")},
		{cmd("CONFIG", "SET", "maxclients", "500"), ok},
		{cmd("CONFIG", "SET", "proto-max-bulk-len", "2mb"), ok},
		{cmd("CONFIG", "GET", "proto-max-bulk-len", "maxclients"), bulks("maxclients", "500", "proto-max-bulk-len", "2097152")},
		{cmd("CONFIG", "SET", "proto-max-bulk-len", "12x"), errr("ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be a memory value")},
		{cmd("CONFIG", "SET", "port", "1"), errr("ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config")},
		{cmd("CONFIG", "SET", "maxclients", "1", "MAXCLIENTS", "2"), errr("ERR CONFIG SET failed (possibly related to argument 'MAXCLIENTS') - duplicate parameter")},
		{cmd("CONFIG", "SET", "maxclients", "1", "x"), errr("ERR wrong number of arguments for 'config|set' command")},
		{cmd("CONFIG", "SET", "nosuch", "1"), errr("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")},
		{cmd("CONFIG", "SET", "set-max-intset-entries", "100", "loglevel", "warning"), ok},
		{cmd("CONFIG", "GET", "set-max-intset-entries", "loglevel"), bulks("loglevel", "warning", "set-max-intset-entries", "100")},
		{cmd("CONFIG", "SET", "loglevel", "loud"), errr("ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning, nothing")},
		{cmd("CONFIG", "SET", "dir", "/tmp/x"), ok},
		{cmd("CONFIG", "GET", "dir"), bulks("dir", "/tmp/x")},
		{cmd("CONFIG", "SET", "dir", ""), errr("ERR CONFIG SET failed (possibly related to argument 'dir') - empty path")},
		{cmd("CONFIG", "RESETSTAT"), ok},
		{cmd("CONFIG", "REWRITE"), errr("ERR The server is running without a config file")},
		{cmd("CONFIG", "REWRITE", "x"), errr("ERR wrong number of arguments for 'config|rewrite' command")},
	})
	if !strings.HasPrefix(tc.do("CONFIG", "HELP"), "*11\r\n+CONFIG <subcommand>") {
		t.Errorf("CONFIG HELP")
	}
}

// CONFIG REWRITE runs the process's rewrite with the running values, and
// reports its failure as Redis does.
func TestConfigRewriteHook(t *testing.T) {
	var fail error
	var seen string
	var s *Server
	s, addr := startServer(t, Config{ConfigRewrite: func() error {
		v, _ := s.RunningConfig("maxclients")
		seen = v
		return fail
	}}, newFakeStore())
	tc := dial(t, addr)
	runSteps(t, tc, []step{
		{cmd("CONFIG", "SET", "maxclients", "77"), ok},
		{cmd("CONFIG", "REWRITE"), ok},
	})
	if seen != "77" {
		t.Errorf("RunningConfig(maxclients) during the rewrite = %q, want 77", seen)
	}
	if _, ok := s.RunningConfig("port"); ok {
		t.Errorf("RunningConfig(port): an immutable parameter is not a running value to write back")
	}
	if v, ok := s.RunningConfig("set-max-intset-entries"); !ok || v != "512" {
		t.Errorf("RunningConfig of a store parameter = %q, %v", v, ok)
	}
	fail = errors.New("open /etc/raftset.conf: permission denied")
	runSteps(t, tc, []step{
		{cmd("CONFIG", "REWRITE"), errr("ERR Rewriting config file: open /etc/raftset.conf: permission denied")},
	})
}

func TestAdminPassedToStore(t *testing.T) {
	store := newFakeStore()
	_, addr := startServer(t, Config{}, store)
	tc := dial(t, addr)
	runSteps(t, tc, []step{
		{cmd("LASTSAVE"), integer(1700000000)},
		{cmd("DEBUG", "DIGEST"), errr("ERR unsupported by the fake store")},
	})
	store.mu.Lock()
	defer store.mu.Unlock()
	if got := strings.Join(store.admin, "|"); got != "LASTSAVE|DEBUG DIGEST" {
		t.Errorf("Admin calls = %q", got)
	}
}

func TestCommand(t *testing.T) {
	s, addr := startServer(t, Config{}, newFakeStore())
	tc := dial(t, addr)
	if got, want := tc.do("COMMAND", "COUNT"), integer(int64(len(s.docs.names))); got != want {
		t.Errorf("COMMAND COUNT = %q, want %q", got, want)
	}
	// Byte for byte what Redis 7 answers for GET.
	redisGet := "*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n" +
		"*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n" +
		"$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"
	info := tc.do("COMMAND", "INFO", "get", "nosuch", "OBJECT|ENCODING")
	if !strings.HasPrefix(info, "*3\r\n"+redisGet+"*-1\r\n*10\r\n$15\r\nobject|encoding\r\n:3\r\n") {
		t.Errorf("COMMAND INFO get nosuch object|encoding = %q", info)
	}
	all := tc.do("COMMAND")
	if !strings.HasPrefix(all, fmt.Sprintf("*%d\r\n", len(s.docs.names))) || !strings.Contains(all, redisGet) {
		t.Errorf("COMMAND lacks GET's entry")
	}
	// Internal commands (between nodes) are not listed.
	if strings.Contains(all, "raftset.forward") || !strings.Contains(all, "raft.join") {
		t.Errorf("COMMAND lists internal commands or lacks RAFT.JOIN")
	}
	if got := tc.do("COMMAND", "INFO"); got != all {
		t.Errorf("COMMAND INFO without names differs from COMMAND")
	}
	wantDocs := array(bulk("get"), array(bulk("summary"), bulk("Returns the string value of a key."),
		bulk("since"), bulk("1.0.0"), bulk("group"), bulk("string"), bulk("arguments"),
		array(array(bulk("name"), bulk("key"), bulk("type"), bulk("key"), bulk("key_spec_index"), integer(0)))))
	if got := tc.do("COMMAND", "DOCS", "get", "nosuch"); got != wantDocs {
		t.Errorf("COMMAND DOCS get = %q, want %q", got, wantDocs)
	}
	if got := tc.do("COMMAND", "DOCS", "object"); !strings.Contains(got, bulk("subcommands")+"*10\r\n"+bulk("object|encoding")) {
		t.Errorf("COMMAND DOCS object = %q", got)
	}
	runSteps(t, tc, []step{
		{cmd("COMMAND", "LIST", "FILTERBY", "PATTERN", "sa*"), bulks("sadd", "save")},
		{cmd("COMMAND", "LIST", "FILTERBY", "PATTERN", "object*"), bulks("object", "object|encoding", "object|freq", "object|idletime", "object|refcount", "object|help")},
		{cmd("COMMAND", "LIST", "FILTERBY", "ACLCAT", "transaction"), bulks("discard", "exec", "multi", "unwatch", "watch")},
		{cmd("COMMAND", "LIST", "FILTERBY", "nope", "x"), errr("ERR syntax error")},
	})
	if got := tc.do("COMMAND", "LIST"); !strings.Contains(got, bulk("client|setname")) {
		t.Errorf("COMMAND LIST lacks subcommands")
	}
}

func TestClientList(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	a, b := dial(t, addr), dial(t, addr)
	runSteps(t, a, []step{{cmd("CLIENT", "SETNAME", "alpha"), ok}})
	runSteps(t, b, []step{{cmd("CLIENT", "SETINFO", "lib-name", "redis-py"), ok}, {cmd("MULTI"), ok}, {cmd("PING"), queuedR}})
	list := a.do("CLIENT", "LIST")
	lines := strings.Split(strings.TrimSuffix(list[strings.Index(list, "\r\n")+2:len(list)-2], "\n"), "\n")
	line := regexp.MustCompile(`^id=\d+ addr=127\.0\.0\.1:\d+ laddr=127\.0\.0\.1:\d+ fd=\d+ name=\S* age=\d+ idle=\d+ flags=[Nxr]+ db=0 sub=0 psub=0 ssub=0 multi=-?\d+ qbuf=\d+ qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=\S+ user=default redir=-1 resp=2 lib-name=\S* lib-ver=\S*$`)
	if len(lines) != 2 {
		t.Fatalf("CLIENT LIST = %q", list)
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("CLIENT LIST line %q", l)
		}
	}
	if !strings.Contains(lines[0], " name=alpha ") || !strings.Contains(lines[0], " flags=N ") || !strings.Contains(lines[0], " cmd=client|list ") {
		t.Errorf("own line = %q", lines[0])
	}
	if !strings.Contains(lines[1], " flags=x ") || !strings.Contains(lines[1], " multi=1 ") || !strings.Contains(lines[1], " lib-name=redis-py ") {
		t.Errorf("other line = %q", lines[1])
	}
	info := a.do("CLIENT", "INFO")
	if !strings.HasSuffix(info, "cmd=client|info user=default redir=-1 resp=2 lib-name= lib-ver=\n\r\n") {
		t.Errorf("CLIENT INFO = %q", info)
	}
}

func TestMaxClients(t *testing.T) {
	_, addr := startServer(t, Config{MaxClients: 1}, newFakeStore())
	a := dial(t, addr)
	runSteps(t, a, []step{{cmd("PING"), "+PONG\r\n"}})
	b := dial(t, addr)
	if got := b.reply(); got != errr("ERR max number of clients reached") {
		t.Errorf("second connection got %q", got)
	}
	b.expectEOF()
	if got := a.do("INFO", "stats"); !strings.Contains(got, "\r\nrejected_connections:1\r\n") {
		t.Errorf("INFO stats = %q", got)
	}
}

// TestClose: Close ends connections, cancels store calls in flight, and
// returns once the connection goroutines are gone.
func TestClose(t *testing.T) {
	store := newFakeStore()
	store.gate = make(chan struct{})
	store.entered = make(chan struct{}, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{Logger: newTestLogger(t)}, store)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	idle := dial(t, ln.Addr().String())
	runSteps(t, idle, []step{{cmd("PING"), "+PONG\r\n"}})
	busy := dial(t, ln.Addr().String())
	busy.send(enc("SADD", "k", "a"))
	<-store.entered // the write is in the store
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve() = %v, want ErrServerClosed", err)
	}
	// The write's fate was unknown: it was answered as such, or the
	// connection closed before the reply could be written.
	if got, err := respwire.ReadReply(busy.r, nil); err == nil && string(got) != errr(command.ErrClusterDown) {
		t.Errorf("write in flight got %q", got)
	}
	idle.expectEOF()
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Errorf("dial after Close succeeded")
	}
	if err := s.Serve(ln); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}
