package resp

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// raftsetOnly are the commands Redis 7.0 (not in sentinel mode) does not
// have: COMMAND DOCS on Redis answers nothing for them.
var raftsetOnly = []string{"client|setinfo", "client|no-touch", "raft.info", "raft.join", "raft.remove", "raft.restore", "raft.shard", "raft.snapshot",
	"raft.transfer", "sentinel"}

// docsFieldsThatDiffer are the COMMAND DOCS fields left out of the
// comparison with Redis 7.0: raftset reports Redis 7.2's summaries and does
// not carry complexity, history or doc_flags (documentation only; redis-cli
// and client libraries use the arguments).
var docsFieldsThatDiffer = []string{"summary", "complexity", "history", "doc_flags"}

// raftsetAndRedis starts a front end on a fake store and a real
// redis-server, and connects to both (closed at cleanup).
func raftsetAndRedis(t *testing.T) (s *Server, ours, theirs *testutil.RESPClient) {
	t.Helper()
	redis := testutil.StartRedis(t)
	s, addr := startServer(t, Config{}, newFakeStore())
	for _, c := range []struct {
		addr string
		to   **testutil.RESPClient
	}{{redis.Addr, &theirs}, {addr, &ours}} {
		conn, err := testutil.DialRESP(c.addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		*c.to = conn
	}
	return s, ours, theirs
}

// TestCommandDocsMatchRedis compares, for every command raftset lists, the
// reply to COMMAND DOCS <name> with a real redis-server 7.0's, byte for byte
// once the fields above are dropped (subcommands Redis has and raftset does
// not are dropped from Redis's reply too). What remains — since, group,
// and the whole arguments tree that redis-cli's hints read — must be equal.
func TestCommandDocsMatchRedis(t *testing.T) {
	s, ours, theirs := raftsetAndRedis(t)

	var missing []string
	for _, name := range s.docs.all {
		a, b := doRESP(t, ours, "COMMAND", "DOCS", name), doRESP(t, theirs, "COMMAND", "DOCS", name)
		if len(b.Elems) == 0 {
			missing = append(missing, name)
			continue
		}
		if len(a.Elems) != 2 || len(b.Elems) != 2 {
			t.Fatalf("COMMAND DOCS %s: ours %s, redis %s", name, a, b)
		}
		ourDocs, redisDocs := a.Elems[1], withoutFields(b.Elems[1], docsFieldsThatDiffer)
		ourDocs = withoutFields(ourDocs, []string{"summary"})
		if subs := field(ourDocs, "subcommands"); subs != nil {
			keep := map[string]bool{}
			var common []testutil.Reply
			for i := 0; i < len(subs.Elems); i += 2 {
				if n := subs.Elems[i].Str; !slices.Contains(raftsetOnly, n) {
					keep[n] = true
					common = append(common, subs.Elems[i], subs.Elems[i+1])
				}
			}
			subs.Elems = common
			rs := field(redisDocs, "subcommands")
			if rs == nil {
				t.Fatalf("COMMAND DOCS %s: redis has no subcommands", name)
			}
			var kept []testutil.Reply
			for i := 0; i < len(rs.Elems); i += 2 {
				if keep[rs.Elems[i].Str] {
					kept = append(kept, rs.Elems[i], withoutFields(rs.Elems[i+1], docsFieldsThatDiffer))
				}
			}
			// Redis lists subcommands in its dict's order; compare as a map.
			*rs = sortPairs(testutil.Reply{Kind: '*', Elems: kept})
			*subs = sortPairs(withoutSubFields(*subs, []string{"summary"}))
		}
		if got, want := encodeReply(nil, ourDocs), encodeReply(nil, redisDocs); string(got) != string(want) {
			t.Errorf("COMMAND DOCS %s differs from Redis 7.0\n ours:  %q\n redis: %q", name, got, want)
		}
	}
	if !slices.Equal(missing, raftsetOnly) {
		t.Errorf("commands Redis 7.0 lacks = %v, want %v", missing, raftsetOnly)
	}
}

// TestCommandKeySpecsMatchRedis compares COMMAND INFO's arity, first/last
// key and step, ACL categories and key specifications (without Redis's
// free-text notes; the command flags differ: raftset reports fewer)
// with Redis 7.0 for every command both have, and the replies of COMMAND
// GETKEYS and GETKEYSANDFLAGS for commands and argument lists that exercise
// each kind of key spec and each error.
func TestCommandKeySpecsMatchRedis(t *testing.T) {
	s, ours, theirs := raftsetAndRedis(t)

	compared := 0
	for _, name := range s.docs.all {
		b := doRESP(t, theirs, "COMMAND", "INFO", name)
		if len(b.Elems) != 1 || b.Elems[0].Null || slices.Contains(raftsetOnly, name) {
			continue
		}
		a := doRESP(t, ours, "COMMAND", "INFO", name).Elems[0]
		r := b.Elems[0]
		for i := range r.Elems[8].Elems {
			r.Elems[8].Elems[i] = withoutFields(r.Elems[8].Elems[i], []string{"notes"})
		}
		for _, i := range []int{1, 3, 4, 5, 6, 8} { // arity, first, last, step, ACL categories, key specs
			if got, want := encodeReply(nil, a.Elems[i]), encodeReply(nil, r.Elems[i]); string(got) != string(want) {
				t.Errorf("COMMAND INFO %s: element %d = %q, redis %q", name, i, got, want)
			}
		}
		compared++
	}
	if compared < 80 {
		t.Errorf("compared COMMAND INFO of %d commands only", compared)
	}

	// COMMAND LIST FILTERBY ACLCAT agrees with Redis over the commands both have.
	for _, cat := range []string{"keyspace", "read", "write", "set", "string", "admin", "fast", "slow",
		"dangerous", "connection", "transaction"} {
		var lists [2][]string
		for i, c := range []*testutil.RESPClient{ours, theirs} {
			for _, e := range doRESP(t, c, "COMMAND", "LIST", "FILTERBY", "ACLCAT", cat).Elems {
				if slices.Contains(s.docs.all, e.Str) && !slices.Contains(raftsetOnly, e.Str) {
					lists[i] = append(lists[i], e.Str)
				}
			}
			slices.Sort(lists[i])
		}
		if !slices.Equal(lists[0], lists[1]) {
			t.Errorf("COMMAND LIST FILTERBY ACLCAT %s = %v, redis %v", cat, lists[0], lists[1])
		}
	}

	for _, args := range [][]string{
		{"sadd", "k", "m1", "m2"}, {"smove", "a", "b", "m"}, {"sinterstore", "d", "a", "b", "c"},
		{"sintercard", "2", "a", "b", "LIMIT", "3"}, {"sintercard", "5", "a", "b"}, {"sintercard", "0", "a"},
		{"sintercard", "-1", "a"}, {"sintercard", "x", "a"}, {"mset", "a", "1", "b", "2"}, {"set", "k", "v", "GET"},
		{"set", "k", "v", "NX", "get", "EX", "10"}, {"set", "k", "v", "NX"}, {"set", "k", "get"},
		{"del", "a", "b"}, {"rename", "a", "b"}, {"object", "encoding", "k"}, {"OBJECT", "ENCODING", "k"},
		{"object", "nosuch", "k"}, {"object", "help"}, {"watch", "a", "b"}, {"getex", "k", "PERSIST"},
		{"sadd", "k"}, {"get", "a", "b"}, {"keys", "*"}, {"ping", "x"}, {"nosuch", "x"}, {"client", "x"},
		{"config", "get", "x"}, {"raftset.forward", "x"},
	} {
		for _, sub := range []string{"GETKEYS", "GETKEYSANDFLAGS"} {
			cmd := append([]string{"COMMAND", sub}, args...)
			got, err := ours.Do(cmd...)
			if err != nil {
				t.Fatal(err)
			}
			want, err := theirs.Do(cmd...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(args[0], "raftset.") {
				want = "-ERR Invalid command specified\r\n" // internal: hidden as if unknown
			}
			if got != want {
				t.Errorf("%q = %q, redis %q", cmd, got, want)
			}
		}
	}
	// Too few arguments is an arity error of the subcommand itself.
	for _, c := range []*testutil.RESPClient{ours, theirs} {
		if got, err := c.Do("COMMAND", "GETKEYS", "ping"); err != nil || got != "-ERR wrong number of arguments for 'command|getkeys' command\r\n" {
			t.Errorf("COMMAND GETKEYS ping = %q, %v", got, err)
		}
	}
}

func doRESP(t *testing.T, c *testutil.RESPClient, args ...string) testutil.Reply {
	t.Helper()
	raw, err := c.Do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return testutil.ParseReply(raw)
}

// withoutFields returns a flat RESP2 map without the named fields.
func withoutFields(m testutil.Reply, names []string) testutil.Reply {
	out := testutil.Reply{Kind: m.Kind}
	for i := 0; i+1 < len(m.Elems); i += 2 {
		if !slices.Contains(names, m.Elems[i].Str) {
			out.Elems = append(out.Elems, m.Elems[i], m.Elems[i+1])
		}
	}
	return out
}

// withoutSubFields drops the named fields from each value of a flat map.
func withoutSubFields(m testutil.Reply, names []string) testutil.Reply {
	out := testutil.Reply{Kind: m.Kind}
	for i := 0; i+1 < len(m.Elems); i += 2 {
		out.Elems = append(out.Elems, m.Elems[i], withoutFields(m.Elems[i+1], names))
	}
	return out
}

// field returns a pointer to the value of a field of a flat map, or nil.
func field(m testutil.Reply, name string) *testutil.Reply {
	for i := 0; i+1 < len(m.Elems); i += 2 {
		if m.Elems[i].Str == name {
			return &m.Elems[i+1]
		}
	}
	return nil
}

// sortPairs orders a flat map by key.
func sortPairs(m testutil.Reply) testutil.Reply {
	type pair struct{ k, v testutil.Reply }
	var ps []pair
	for i := 0; i+1 < len(m.Elems); i += 2 {
		ps = append(ps, pair{m.Elems[i], m.Elems[i+1]})
	}
	slices.SortFunc(ps, func(a, b pair) int { return strings.Compare(a.k.Str, b.k.Str) })
	out := testutil.Reply{Kind: m.Kind}
	for _, p := range ps {
		out.Elems = append(out.Elems, p.k, p.v)
	}
	return out
}

// encodeReply writes a parsed reply back as RESP2, so that two replies can
// be compared byte for byte after fields were dropped.
func encodeReply(dst []byte, r testutil.Reply) []byte {
	switch {
	case r.Null:
		return append(dst, string(r.Kind)+"-1\r\n"...)
	case r.Kind == '*':
		dst = append(dst, "*"+strconv.Itoa(len(r.Elems))+"\r\n"...)
		for _, e := range r.Elems {
			dst = encodeReply(dst, e)
		}
		return dst
	case r.Kind == '$':
		return append(dst, "$"+strconv.Itoa(len(r.Str))+"\r\n"+r.Str+"\r\n"...)
	default:
		return append(dst, string(r.Kind)+r.Str+"\r\n"...)
	}
}
