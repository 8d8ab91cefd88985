package fsm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/testutil"
	"raftset/snapshot"
)

// handlersOffTable are the state machine's handlers for commands that the
// command table does not flag as keyspace commands (Write or ReadOnly), and
// how each reaches the state machine anyway.
var handlersOffTable = map[string]string{
	CmdExpire: "proposed by the leader's active expiry; not in the table",
	CmdEvict:  "proposed by the leader's eviction (maxmemory); not in the table",
	CmdConfig: "CONFIG SET of a replicated parameter, proposed by the node; the table's config is Admin",
	"debug":   "DEBUG DIGEST(-VALUE), read through the node by its Admin handler",
	"ping":    "may sit in a transaction",
	"echo":    "may sit in a transaction",
}

// TestCommandTable checks the pairing of the command table (internal/command,
// which cannot import this package) with the handlers, both ways: every
// command of the table that reads or writes the keyspace has a handler, with
// the table's arity and write flag; every handler is for such a command, or
// is one of handlersOffTable.
func TestCommandTable(t *testing.T) {
	f := newTestFSM(t)
	specs := command.Commands()
	for name, spec := range specs {
		if !spec.Has(command.Write) && !spec.Has(command.ReadOnly) {
			for _, sub := range spec.Subs {
				if sub.Has(command.Write) || sub.Has(command.ReadOnly) {
					if f.cmds[name] == nil {
						t.Errorf("no handler for %s (parent of %s)", name, sub.Name)
					}
				}
			}
			continue
		}
		def := f.cmds[name]
		if def == nil {
			t.Errorf("no handler for %s", name)
			continue
		}
		if def.arity != spec.Arity || def.write != spec.Has(command.Write) {
			t.Errorf("%s: arity %d write %v, table says %d %v", name, def.arity, def.write, spec.Arity, spec.Has(command.Write))
		}
	}
	for name := range handlersOffTable {
		if f.cmds[name] == nil {
			t.Errorf("no handler for %s (%s)", name, handlersOffTable[name])
		}
	}
	for name := range f.cmds {
		if _, ok := handlersOffTable[name]; ok {
			continue
		}
		spec := specs[name]
		if spec == nil {
			t.Errorf("handler %s has no spec in the command table", name)
			continue
		}
		keyspace := spec.Has(command.Write) || spec.Has(command.ReadOnly)
		for _, sub := range spec.Subs {
			keyspace = keyspace || sub.Has(command.Write) || sub.Has(command.ReadOnly)
		}
		if !keyspace {
			t.Errorf("handler %s: the table routes %s away from the state machine (neither Write nor ReadOnly)", name, name)
		}
	}
}

func TestPrepare(t *testing.T) {
	const now = 1_000_000
	tests := []struct {
		args []string
		want string // the proposed args joined by spaces, or the error reply
	}{
		{[]string{"SADD", "k", "a"}, "SADD k a"}, // the name is not rewritten: Apply looks it up in any case
		{[]string{"EXPIRE", "k", "10"}, "pexpireat k 1010000"},
		{[]string{"expire", "k", "10", "NX"}, "pexpireat k 1010000 nx"},
		{[]string{"pexpire", "k", "-5", "xx", "gt"}, "pexpireat k 999995 xx gt"},
		{[]string{"expireat", "k", "2000", "lt"}, "pexpireat k 2000000 lt"},
		{[]string{"PEXPIREAT", "k", "5", "LT"}, "pexpireat k 5 lt"},
		{[]string{"expire", "k", "9223372036854776"}, "-ERR invalid expire time in 'expire' command\r\n"},
		{[]string{"pexpire", "k", "9223372036854775000"}, "-ERR invalid expire time in 'pexpire' command\r\n"},
		{[]string{"expire", "k", "x", "nx"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"expire", "k", "1", "nx", "gt"}, "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"},
		{[]string{"set", "k", "v"}, "set k v"},
		{[]string{"SET", "k", "v", "EX", "10", "GET", "NX"}, "set k v nx get pxat 1010000"},
		{[]string{"set", "k", "v", "px", "10"}, "set k v pxat 1000010"},
		{[]string{"set", "k", "v", "exat", "10"}, "set k v pxat 10000"},
		{[]string{"set", "k", "v", "pxat", "10", "xx"}, "set k v xx pxat 10"},
		{[]string{"set", "k", "v", "keepttl"}, "set k v keepttl"},
		{[]string{"set", "k", "v", "ex", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
		{[]string{"set", "k", "v", "ex"}, "-ERR syntax error\r\n"},
		{[]string{"setex", "k", "10", "v"}, "set k v pxat 1010000"},
		{[]string{"PSETEX", "k", "10", "v"}, "set k v pxat 1000010"},
		{[]string{"setex", "k", "0", "v"}, "-ERR invalid expire time in 'setex' command\r\n"},
		{[]string{"getex", "k", "ex", "10"}, "getex k pxat 1010000"},
		{[]string{"getex", "k", "PERSIST"}, "getex k persist"},
		{[]string{"getex", "k", "ex", "0"}, "getex k ex 0"}, // decided after the key lookup
		{[]string{"getex", "k", "foo"}, "-ERR syntax error\r\n"},
		{[]string{"eval", "return 1", "1", "k"}, "eval return 1 1 k"},
		{[]string{"eval", "return 1", "2", "k"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		{[]string{"evalsha", "ab", "-1"}, "-ERR Number of keys can't be negative\r\n"},
		{[]string{"evalsha", "ab", "one"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"script", "flush", "now"}, "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"},
		{[]string{"script", "load", "return +"}, "-ERR Error compiling script (new function): user_script:1: syntax error near '+'\r\n"},
		{[]string{"script", "load", "return 1"}, "script load return 1"},
		{[]string{"spop", "k", "-1"}, "-ERR value is out of range, must be positive\r\n"},
		{[]string{"spop", "k", "1", "2"}, "-ERR syntax error\r\n"},
		{[]string{"incrby", "k", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"decrby", "k", "-9223372036854775808"}, "-ERR decrement would overflow\r\n"},
		{[]string{"mset", "a", "1", "b"}, "-ERR wrong number of arguments for 'mset' command\r\n"},
		{[]string{"flushall", "ASYNC"}, "flushall"},
		{[]string{"flushdb", "x"}, "-ERR syntax error\r\n"},
		{[]string{"config", "set", "SET-MAX-INTSET-ENTRIES", "5"}, "config set SET-MAX-INTSET-ENTRIES 5"},
		{[]string{"config", "set", "maxmemory", "5"}, "config set maxmemory 5"},
		{[]string{"config", "set", "maxmemory", "5xb"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n"},
		{[]string{"config", "set", "maxmemory-policy", "lru"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\r\n"},
		{[]string{"config", "set", "maxmemory-samples", "0"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-samples') - argument must be between 1 and 2147483647 inclusive\r\n"},
		{[]string{"config", "set", "maxmemory-eviction-tenacity", "101"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-eviction-tenacity') - argument must be between 0 and 100 inclusive\r\n"},
		{[]string{"config", "set", "maxmemory-wrong", "5"}, "-ERR Unknown option or number of arguments for CONFIG SET - 'maxmemory-wrong'\r\n"},
		{[]string{"config", "set", "set-max-listpack-value", "-1"}, "-ERR CONFIG SET failed (possibly related to argument 'set-max-listpack-value') - argument must be between 0 and 9223372036854775807 inclusive\r\n"},
		{[]string{"sadd", "k"}, "-ERR wrong number of arguments for 'sadd' command\r\n"},
		{[]string{"nosuch", "k"}, "-ERR unknown command 'nosuch', with args beginning with: 'k' \r\n"},
	}
	f := newTestFSM(t)
	for _, tt := range tests {
		op := f.Prepare(toArgs(tt.args...), now)
		var got string
		if op.Kind == command.OpReply {
			got = string(op.Reply)
		} else {
			got = string(bytes.Join(op.Args, []byte(" ")))
		}
		if got != tt.want {
			t.Errorf("Prepare(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
	// Prepare does not modify the caller's arguments.
	args := toArgs("SET", "k", "v")
	f.Prepare(args, now)
	if string(args[0]) != "SET" {
		t.Errorf("Prepare changed args[0] to %q", args[0])
	}
}

// TestExpiryAcrossReplicas covers the leader's active expiry and the clock.
func TestExpiryAcrossReplicas(t *testing.T) {
	f := newTestFSM(t)
	applyCmd(t, f, 1000, "set", "a", "v", "pxat", "2000")
	applyCmd(t, f, 1000, "set", "b", "v", "pxat", "5000")
	applyCmd(t, f, 1000, "set", "c", "v")

	// The leader samples expired keys with its own clock; nothing is removed.
	if got := f.ExpiredKeys(1500, 10); len(got) != 0 {
		t.Errorf("ExpiredKeys(1500) = %q, want none", got)
	}
	got := f.ExpiredKeys(3000, 10)
	if want := [][]byte{[]byte("a")}; !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("ExpiredKeys(3000) = %q, want %q", got, want)
	}
	if n, _ := f.KeyspaceCounts(); n != 3 {
		t.Errorf("ExpiredKeys changed state: %d keys", n)
	}
	// Reads hide an expired key but keep it.
	if got := doCmd(t, f, 3000, "get", "a"); got != "$-1\r\n" {
		t.Errorf("GET a at 3000 = %q, want null", got)
	}
	if got := doCmd(t, f, 1999, "get", "a"); got != "$1\r\nv\r\n" {
		t.Errorf("GET a at 1999 = %q, want v", got)
	}

	// raftset.expire deletes only keys still expired at the entry's time: the
	// entry's clock (1500) says a is alive.
	if got := applyCmd(t, f, 1500, CmdExpire, "a", "b", "c", "nokey"); got != ":0\r\n" {
		t.Errorf("raftset.expire at 1500 = %q, want :0", got)
	}
	// b got a new deadline before the expiry entry was applied.
	applyCmd(t, f, 2500, "pexpireat", "b", "9000")
	if got := applyCmd(t, f, 2500, CmdExpire, "a", "b", "c"); got != ":1\r\n" {
		t.Errorf("raftset.expire at 2500 = %q, want :1", got)
	}
	if got := dump(f); !strings.Contains(got, "keys=2") || strings.Contains(got, `"a"`) {
		t.Errorf("after expiry:\n%s", got)
	}

	// The clock never runs backwards: an entry from a leader whose clock is
	// behind still sees b expired at 9000 once the clock has passed it.
	applyCmd(t, f, 10_000, "ping")
	if got := applyCmd(t, f, 100, "exists", "b"); got != ":0\r\n" {
		t.Errorf("EXISTS b with an older entry clock = %q, want :0", got)
	}
	if got := applyCmd(t, f, 100, "sadd", "b", "x"); got != ":1\r\n" {
		t.Errorf("SADD b on an expired string = %q, want :1 (the write treats it as absent)", got)
	}
	if got := f.Stats().ClockMs; got != 10_000 {
		t.Errorf("clock = %d, want 10000", got)
	}
	// Reads use max(their clock, the state's clock).
	applyCmd(t, f, 10_000, "set", "d", "v", "pxat", "10500")
	if got := doCmd(t, f, 0, "get", "d"); got != "$1\r\nv\r\n" {
		t.Errorf("GET d = %q", got)
	}
	applyCmd(t, f, 11_000, "ping")
	if got := doCmd(t, f, 0, "get", "d"); got != "$-1\r\n" {
		t.Errorf("GET d after the state's clock passed its deadline = %q, want null", got)
	}
}

func TestExpiredKeysSampling(t *testing.T) {
	f := newTestFSM(t)
	var ops []command.Op
	for i := range 1000 {
		ops = append(ops, command.Cmd(toArgs("set", fmt.Sprint("k", i), "v", "pxat", fmt.Sprint(2000+i%2*10_000))...))
	}
	applyEntry(t, f, 1000, ops...)
	seen := map[string]bool{}
	for range 100 {
		keys := f.ExpiredKeys(5000, 20)
		if len(keys) > 20 {
			t.Fatalf("ExpiredKeys returned %d keys, max 20", len(keys))
		}
		args := []string{CmdExpire}
		for _, k := range keys {
			seen[string(k)] = true
			args = append(args, string(k))
		}
		if len(keys) > 0 {
			applyCmd(t, f, 5000, args...)
		}
	}
	if n, e := f.KeyspaceCounts(); n != 500 || e != 500 {
		t.Errorf("after expiry: %d keys, %d with deadlines; want 500, 500", n, e)
	}
	for k := range seen {
		var i int
		fmt.Sscanf(k, "k%d", &i)
		if i%2 != 0 {
			t.Errorf("ExpiredKeys returned %s, which is not expired", k)
		}
	}
}

// TestWatch checks EXEC against WATCH stamps.
func TestWatch(t *testing.T) {
	f := newTestFSM(t)
	now := int64(1000)
	tx := func(w []command.Watch, args ...string) string {
		t.Helper()
		return string(applyEntry(t, f, now, command.Op{Kind: command.OpTx, Tx: &command.Tx{
			Watches: w, Ops: []command.Op{command.Cmd(toArgs(args...)...), command.Cmd(toArgs("get", "x")...)},
		}})[0])
	}
	applyCmd(t, f, now, "set", "x", "1")
	w := f.WatchStamp(toArgs("x", "missing"))
	if !w[0].Exists || w[1].Exists {
		t.Fatalf("WatchStamp = %+v", w)
	}
	if got := tx(w, "incr", "x"); got != "*2\r\n:2\r\n$1\r\n2\r\n" {
		t.Errorf("EXEC with unchanged keys = %q", got)
	}
	// Our own EXEC changed x: the old stamps no longer hold.
	if got := tx(w, "incr", "x"); got != "*-1\r\n" {
		t.Errorf("EXEC after x changed = %q, want *-1", got)
	}
	w = f.WatchStamp(toArgs("x", "missing"))
	applyCmd(t, f, now, "sadd", "missing", "a") // created
	if got := tx(w, "incr", "x"); got != "*-1\r\n" {
		t.Errorf("EXEC after a watched missing key appeared = %q, want *-1", got)
	}
	w = f.WatchStamp(toArgs("x"))
	applyCmd(t, f, now, "sadd", "other", "a")
	applyCmd(t, f, now, "sadd", "x2", "a")
	applyCmd(t, f, now, "sadd", "missing", "a") // no change: already a member
	if got := tx(w, "get", "x"); got != "*2\r\n$1\r\n2\r\n$1\r\n2\r\n" {
		t.Errorf("EXEC after unrelated writes = %q", got)
	}
	// A watched key that expires aborts EXEC.
	applyCmd(t, f, now, "pexpireat", "x", "1500")
	w = f.WatchStamp(toArgs("x"))
	now = 1500
	if got := tx(w, "get", "x"); got != "*-1\r\n" {
		t.Errorf("EXEC after the watched key expired = %q, want *-1", got)
	}
	// Deleting and recreating a key between WATCH and EXEC aborts.
	applyCmd(t, f, now, "set", "y", "1")
	w = f.WatchStamp(toArgs("y"))
	applyCmd(t, f, now, "del", "y")
	applyCmd(t, f, now, "set", "y", "1")
	if got := tx(w, "get", "y"); got != "*-1\r\n" {
		t.Errorf("EXEC after delete and recreate = %q, want *-1", got)
	}
	// Stamps survive a snapshot.
	w = f.WatchStamp(toArgs("y", "nokey"))
	g := restored(t, persist(t, f))
	if got := g.WatchStamp(toArgs("y", "nokey")); !slices.EqualFunc(got, w, func(a, b command.Watch) bool {
		return bytes.Equal(a.Key, b.Key) && a.Exists == b.Exists && a.Stamp == b.Stamp
	}) {
		t.Errorf("WatchStamp after restore = %+v, want %+v", got, w)
	}
}

// TestTransaction checks the reply of a transaction with an error inside,
// and that random choices inside one are the same on every replica.
func TestTransaction(t *testing.T) {
	f, g := newTestFSM(t), newTestFSM(t)
	var members []string
	for i := range 200 {
		members = append(members, fmt.Sprint("m", i))
	}
	for _, x := range []*FSM{f, g} {
		applyCmd(t, x, 1000, append([]string{"sadd", "s"}, members...)...)
	}
	tx := command.Op{Kind: command.OpTx, Tx: &command.Tx{Ops: []command.Op{
		command.Cmd(toArgs("srandmember", "s", "5")...),
		{Kind: command.OpReply, Reply: command.Error(command.ErrSyntax)},
		command.Cmd(toArgs("spop", "s", "3")...),
		command.Cmd(toArgs("randomkey")...),
		command.Cmd(toArgs("srandmember", "s", "-4")...),
	}}}
	a, b := applyEntry(t, f, 1000, tx), applyEntry(t, g, 1000, tx)
	if !bytes.Equal(a[0], b[0]) {
		t.Errorf("replicas answered %q and %q", a[0], b[0])
	}
	if !strings.HasPrefix(string(a[0]), "*5\r\n*5\r\n") || !strings.Contains(string(a[0]), "-ERR syntax error\r\n") {
		t.Errorf("EXEC reply = %q", a[0])
	}
	if dump(f) != dump(g) {
		t.Error("states differ after the transaction")
	}
	// The next entry draws different numbers (the seed includes the index).
	c := applyEntry(t, f, 1000, command.Cmd(toArgs("srandmember", "s", "5")...))
	d := applyEntry(t, f, 1000, command.Cmd(toArgs("srandmember", "s", "5")...))
	if bytes.Equal(c[0], d[0]) {
		t.Errorf("two entries drew the same members %q", c[0])
	}
}

// TestRandomCommands checks SPOP and SRANDMEMBER replies on every encoding.
func TestRandomCommands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members func(i int) string
		n       int
		enc     string
	}{
		{"intset", func(i int) string { return fmt.Sprint(i * 3) }, 100, "intset"},
		{"listpack", func(i int) string { return fmt.Sprint("m", i) }, 100, "listpack"},
		{"hashtable", func(i int) string { return fmt.Sprint("m", i) }, 1000, "hashtable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFSM(t)
			all := map[string]bool{}
			args := []string{"sadd", "s"}
			for i := range tc.n {
				all[tc.members(i)] = true
				args = append(args, tc.members(i))
			}
			if tc.enc == "hashtable" {
				applyCmd(t, f, 0, args...)
			} else {
				for _, m := range args[2:] {
					applyCmd(t, f, 0, "sadd", "s", m)
				}
			}
			if got := doCmd(t, f, 0, "object", "encoding", "s"); got != fmt.Sprintf("$%d\r\n%s\r\n", len(tc.enc), tc.enc) {
				t.Fatalf("encoding %q, want %s", got, tc.enc)
			}
			check := func(what, reply string, n int, distinct bool) []string {
				t.Helper()
				ms := parseBulkArray(t, reply)
				if len(ms) != n {
					t.Fatalf("%s: %d members, want %d", what, len(ms), n)
				}
				seen := map[string]bool{}
				for _, m := range ms {
					if !all[m] {
						t.Fatalf("%s: %q is not a member", what, m)
					}
					if distinct && seen[m] {
						t.Fatalf("%s: %q twice", what, m)
					}
					seen[m] = true
				}
				return ms
			}
			check("SRANDMEMBER 10", doCmd(t, f, 0, "srandmember", "s", "10"), 10, true)
			check("SRANDMEMBER 90", doCmd(t, f, 0, "srandmember", "s", "90"), 90, true)
			check("SRANDMEMBER -300", doCmd(t, f, 0, "srandmember", "s", "-300"), 300, false)
			size := tc.n
			// The last two counts take Redis's two strategies for a big
			// count (pop one by one, or keep a rebuilt remainder).
			for _, count := range []int{1, 7, tc.n * 4 / 10, tc.n * 45 / 100} {
				popped := check(fmt.Sprint("SPOP ", count), applyCmd(t, f, 0, "spop", "s", fmt.Sprint(count)), count, true)
				for _, m := range popped {
					delete(all, m)
				}
				size -= count
				if got := doCmd(t, f, 0, "scard", "s"); got != fmt.Sprintf(":%d\r\n", size) {
					t.Fatalf("SCARD after SPOP %d = %q, want %d", count, got, size)
				}
				for _, m := range popped {
					if got := doCmd(t, f, 0, "sismember", "s", m); got != ":0\r\n" {
						t.Fatalf("popped %q is still a member", m)
					}
				}
			}
			rest := check("SPOP all", applyCmd(t, f, 0, "spop", "s", "100000"), size, true)
			if len(rest) != len(all) {
				t.Errorf("SPOP all returned %d members, %d remained", len(rest), len(all))
			}
			if got := doCmd(t, f, 0, "exists", "s"); got != ":0\r\n" {
				t.Errorf("key still exists after popping everything")
			}
		})
	}
}

// parseBulkArray parses an array of bulk strings.
func parseBulkArray(t *testing.T, reply string) []string {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(reply, "*%d\r\n", &n); err != nil {
		t.Fatalf("not an array: %q", reply)
	}
	rest := reply[strings.Index(reply, "\r\n")+2:]
	out := make([]string, 0, n)
	for range n {
		var l int
		fmt.Sscanf(rest, "$%d\r\n", &l)
		rest = rest[strings.Index(rest, "\r\n")+2:]
		out = append(out, rest[:l])
		rest = rest[l+2:]
	}
	return out
}

// TestSScanHashtable checks SSCAN's guarantee on a hashtable while members
// come and go: every member present throughout is returned.
func TestSScanHashtable(t *testing.T) {
	f := newTestFSM(t)
	args := []string{"sadd", "s"}
	for i := range 500 {
		args = append(args, fmt.Sprint("m", i))
	}
	applyCmd(t, f, 0, args...)
	seen := map[string]bool{}
	cursor := "0"
	for step := 0; ; step++ {
		reply := doCmd(t, f, 0, "sscan", "s", cursor, "count", "20")
		parts := strings.SplitN(reply, "\r\n", 4)
		cursor = parts[2]
		for _, m := range parseBulkArray(t, parts[3]) {
			seen[m] = true
		}
		if cursor == "0" {
			break
		}
		// Churn: remove even members below 100, add new ones.
		if step < 50 {
			applyCmd(t, f, 0, "srem", "s", fmt.Sprint("m", step*2))
			applyCmd(t, f, 0, "sadd", "s", fmt.Sprint("new", step))
		}
	}
	for i := 100; i < 500; i++ {
		if !seen[fmt.Sprint("m", i)] {
			t.Errorf("m%d was present throughout but not returned", i)
		}
	}
}

// TestScanKeyspace is the same guarantee for SCAN over keys.
func TestScanKeyspace(t *testing.T) {
	f := newTestFSM(t)
	var ops []command.Op
	for i := range 300 {
		ops = append(ops, command.Cmd(toArgs("set", fmt.Sprint("k", i), "v")...))
	}
	applyEntry(t, f, 0, ops...)
	seen := map[string]bool{}
	cursor := "0"
	for step := 0; ; step++ {
		reply := doCmd(t, f, 0, "scan", cursor, "count", "7")
		parts := strings.SplitN(reply, "\r\n", 4)
		cursor = parts[2]
		for _, m := range parseBulkArray(t, parts[3]) {
			seen[m] = true
		}
		if cursor == "0" {
			break
		}
		applyCmd(t, f, 0, "del", fmt.Sprint("k", step%50))
		applyCmd(t, f, 0, "set", fmt.Sprint("new", step), "v")
	}
	for i := 50; i < 300; i++ {
		if !seen[fmt.Sprint("k", i)] {
			t.Errorf("k%d was present throughout but not returned", i)
		}
	}
}

// TestRestoreCorrupt feeds damaged snapshots to Restore: each is refused
// with an error and the previous state stays as it was.
func TestRestoreCorrupt(t *testing.T) {
	src := newTestFSM(t)
	for i := range 50 {
		applyCmd(t, src, 1000, "sadd", fmt.Sprint("s", i), "a", "b", fmt.Sprint(i))
	}
	applyCmd(t, src, 1000, "set", "str", "value")
	good := persist(t, src)

	f := newTestFSM(t)
	applyCmd(t, f, 1000, "sadd", "mine", "x")
	before, applied := dump(f), f.AppliedIndex()

	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	for name, data := range map[string][]byte{
		"truncated":    good[:len(good)-20],
		"flipped byte": flipped,
		"bad magic":    append([]byte("RODIS"), good[5:]...),
		"empty":        nil,
		"bad checksum": append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1),
	} {
		err := f.Restore(nopCloser{bytes.NewReader(data)})
		if err == nil {
			t.Errorf("%s: Restore succeeded", name)
			continue
		}
		if got := dump(f); got != before || f.AppliedIndex() != applied {
			t.Errorf("%s: state changed after a failed Restore:\n%s", name, diffLines(got, before))
		}
	}
	// A snapshot whose versions list is short is refused too.
	var buf bytes.Buffer
	wr, err := snapshot.NewWriter(&buf, snapshot.WriterOptions{Aux: []snapshot.AuxField{{Key: AuxVersions, Value: "\x01"}}})
	if err != nil {
		t.Fatal(err)
	}
	wr.SelectDB(0, 2, 0)
	wr.WriteString([]byte("a"), []byte("1"), snapshot.NoExpiry)
	wr.WriteString([]byte("b"), []byte("1"), snapshot.NoExpiry)
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); !errors.Is(err, ErrSnapshot) {
		t.Errorf("Restore with 1 version for 2 keys: %v, want ErrSnapshot", err)
	}
	if got := dump(f); got != before {
		t.Errorf("state changed after a failed Restore")
	}
}

// TestSnapshotAux checks the caller's AUX fields and the metadata.
func TestSnapshotAux(t *testing.T) {
	f := newTestFSM(t)
	f.SetSnapshotAux(func() []snapshot.AuxField {
		return []snapshot.AuxField{{Key: "raft-config", Value: "n1,n2,n3"}}
	})
	applyCmd(t, f, 1234, "config", "set", "set-max-listpack-entries", "3")
	applyCmd(t, f, 1234, "sadd", "s", "a", "b", "c", "d")
	g := restored(t, persist(t, f))
	if got := g.RestoredAux(); len(got) != 1 || got[0] != (snapshot.AuxField{Key: "raft-config", Value: "n1,n2,n3"}) {
		t.Errorf("RestoredAux() = %+v", got)
	}
	if got := g.Limits(); got.MaxListpackEntries != 3 || got.MaxIntsetEntries != 512 {
		t.Errorf("restored Limits() = %+v", got)
	}
	if got, want := g.AppliedIndex(), f.AppliedIndex(); got != want {
		t.Errorf("restored AppliedIndex() = %d, want %d", got, want)
	}
	if got := g.Stats(); got.ClockMs != 1234 || got.Hashtables != 1 || got.Keys != 1 {
		t.Errorf("restored Stats() = %+v", got)
	}
	// WriteRDB writes the same file as a snapshot.
	var buf bytes.Buffer
	if err := f.WriteRDB(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), persist(t, f)) {
		t.Error("WriteRDB differs from a snapshot of the same state")
	}
}

// TestSnapshotVectorsRoundTrip restores each Redis vector through our own
// snapshot: same digest, same encodings.
func TestSnapshotVectorsRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "*", "*.rdb"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f := newTestFSM(t)
		if _, err := f.LoadRDB(bytes.NewReader(data), LoadOptions{}); err != nil {
			t.Fatal(err)
		}
		g := restored(t, persist(t, f))
		if dump(g) != dump(f) {
			t.Errorf("%s: restored state differs:\n%s", file, diffLines(dump(g), dump(f)))
		}
	}
}

func TestLoadRDBDropsExpired(t *testing.T) {
	f := newTestFSM(t)
	applyCmd(t, f, 1000, "set", "old", "v", "pxat", "2000")
	applyCmd(t, f, 1000, "set", "new", "v", "pxat", "9000")
	applyCmd(t, f, 1000, "sadd", "s", "1")
	var buf bytes.Buffer
	if err := f.WriteRDB(&buf); err != nil {
		t.Fatal(err)
	}
	g := newTestFSM(t)
	applyCmd(t, g, 500, "set", "replaced", "v")
	n, err := g.LoadRDB(bytes.NewReader(buf.Bytes()), LoadOptions{NowMs: 5000})
	if err != nil || n != 2 {
		t.Fatalf("LoadRDB = %d, %v; want 2 keys", n, err)
	}
	if got := doCmd(t, g, 5000, "keys", "*"); !strings.Contains(got, "new") || strings.Contains(got, "old") || strings.Contains(got, "replaced") {
		t.Errorf("keys after LoadRDB: %q", got)
	}
	// Every loaded key counts as changed, and the last-delete index moved.
	if w := g.WatchStamp(toArgs("new", "nokey")); w[0].Stamp != g.AppliedIndex() || w[1].Stamp != g.AppliedIndex() {
		t.Errorf("stamps after LoadRDB: %+v, want %d", w, g.AppliedIndex())
	}
}

func TestWaitApplied(t *testing.T) {
	f := newTestFSM(t)
	done := make(chan error)
	go func() { done <- f.WaitApplied(context.Background(), 3) }()
	for range 3 {
		applyCmd(t, f, 0, "ping")
	}
	if err := <-done; err != nil {
		t.Errorf("WaitApplied = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- f.WaitApplied(ctx, 100) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WaitApplied after cancel = %v, want context.Canceled", err)
	}
	// Non-command entries advance the applied index too.
	if got := f.Apply(&raft.Log{Index: 4, Term: 1, Type: raft.LogConfiguration}); got != nil {
		t.Errorf("Apply(configuration) = %v, want nil", got)
	}
	if got := f.AppliedIndex(); got != 4 {
		t.Errorf("AppliedIndex() = %d, want 4", got)
	}
}

func TestReadRefusesWrites(t *testing.T) {
	f := newTestFSM(t)
	if got := string(f.Read(toArgs("sadd", "k", "a"), 0, nil, nil)); !strings.HasPrefix(got, "-ERR") {
		t.Errorf("Read(SADD) = %q, want an error", got)
	}
	if n, _ := f.KeyspaceCounts(); n != 0 {
		t.Error("Read wrote")
	}
}

// TestSnapshotSharing changes, while a snapshot is live, sets in every
// position a chunk copy can miss: a key moved by a deletion from an untouched
// chunk into an already copied one, a renamed key, keys in the last partial
// chunk, then checks that the snapshot still holds the state at capture.
func TestSnapshotSharing(t *testing.T) {
	f := newTestFSM(t)
	const n = 2*chunkLen + 100
	var ops []command.Op
	for i := range n {
		k := fmt.Sprint("k", i)
		switch {
		case i%3 == 0:
			ops = append(ops, command.Cmd(toArgs("sadd", k, "1", "2", "3")...))
		case i%3 == 1 || (i > 20 && i < n-20 && i%50 != 2):
			ops = append(ops, command.Cmd(toArgs("sadd", k, "a", "b", "c")...))
		default: // hashtables at both ends and here and there
			args := []string{"sadd", k}
			for j := range 130 {
				args = append(args, fmt.Sprint("m", j))
			}
			ops = append(ops, command.Cmd(toArgs(args...)...))
		}
	}
	applyEntry(t, f, 1000, ops...)
	for _, script := range [][][]string{
		{{"sadd", "k5", "x"}, {"del", "k7"}, {"sadd", "k7", "y"}, {"sadd", fmt.Sprint("k", n-1), "z"}},
		{{"del", "k0"}, {"sadd", fmt.Sprint("k", n-1), "moved"}, {"srem", fmt.Sprint("k", n-2), "m1"}},
		{{"rename", fmt.Sprint("k", chunkLen+1), "new"}, {"sadd", "new", "q"}, {"spop", "new"}},
		{{"rename", fmt.Sprint("k", n-3), "k4"}, {"sadd", "k4", "r"}, {"spop", "k4", "100"}},
		{{"expire", "k10", "100"}, {"sadd", "k10", "e"}, {"smove", "k11", "k12", "b"}, {"sinterstore", "k13", "k14", "k14"}},
		{{"flushall"}, {"sadd", "k1", "after"}},
	} {
		atCapture := dump(f)
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range script {
			applyCmd(t, f, 1000, cmd...)
		}
		sink := &memSink{}
		if err := snap.Persist(sink); err != nil {
			t.Fatal(err)
		}
		snap.Release()
		if got := dump(restored(t, sink.Bytes())); got != atCapture {
			t.Fatalf("after %q the snapshot holds:\n%s", script, diffLines(got, atCapture))
		}
	}
}

// A snapshot of a newer snapshot format (raftset-ver above the one this
// build reads) is refused with a message that says so, the state is kept,
// and the state machine halts: Raft would otherwise retry the install
// forever while this node no longer follows the cluster.
func TestRestoreNewerFormatHalts(t *testing.T) {
	src := newTestFSM(t)
	applyCmd(t, src, 1000, "sadd", "s", "a")
	good := persist(t, src)
	// "1" is written as an RDB integer string: 0xC0, then the int8.
	marker := append([]byte(snapshot.AuxRaftsetVer), 0xC0, 1)
	i := bytes.Index(good, marker)
	if i < 0 {
		t.Fatal("no raftset-ver AUX field in the snapshot")
	}
	newer := bytes.Clone(good)
	newer[i+len(marker)-1] = snapshot.RaftsetFormat + 1

	f := newTestFSM(t)
	applyCmd(t, f, 1000, "sadd", "mine", "x")
	before := dump(f)
	err := f.Restore(nopCloser{bytes.NewReader(newer)})
	if !errors.Is(err, snapshot.ErrNewerFormat) ||
		!strings.Contains(err.Error(), "snapshot written by a newer raftset (snapshot format 3, this binary reads up to 2): upgrade this node") {
		t.Fatalf("Restore of a format-2 snapshot = %v", err)
	}
	if dump(f) != before {
		t.Error("state changed")
	}
	select {
	case <-f.Halted():
	default:
		t.Fatal("the state machine did not halt")
	}
	if herr := f.HaltErr(); !errors.Is(herr, ErrHalted) || !errors.Is(herr, snapshot.ErrNewerFormat) {
		t.Errorf("HaltErr = %v", herr)
	}
}

// TestExpiredKeysBounded: one call returns at most MaxExpiredKeys keys
// however many are due and however many are asked for, so the leader's
// expiry proposal stays bounded; the rest come in later calls.
func TestExpiredKeysBounded(t *testing.T) {
	f := newTestFSM(t)
	const n = MaxExpiredKeys + 5000
	ops := make([]command.Op, 0, n)
	for i := range n {
		ops = append(ops, command.Cmd(toArgs("set", fmt.Sprint("k", i), "v", "pxat", "2000")...))
	}
	applyEntry(t, f, 1000, ops...)
	for _, limit := range []int{n, 1 << 30} {
		if got := len(f.ExpiredKeys(5000, limit)); got != MaxExpiredKeys {
			t.Errorf("ExpiredKeys(limit %d) returned %d keys, want %d", limit, got, MaxExpiredKeys)
		}
	}
	total := 0
	for range 10 {
		keys := f.ExpiredKeys(5000, 1<<30)
		if len(keys) == 0 {
			break
		}
		if len(keys) > MaxExpiredKeys {
			t.Fatalf("ExpiredKeys returned %d keys, max %d", len(keys), MaxExpiredKeys)
		}
		total += len(keys)
		applyCmd(t, f, 5000, append([]string{CmdExpire}, bytesToStrings(keys)...)...)
	}
	if total != n {
		t.Errorf("expired %d keys in bounded calls, want %d", total, n)
	}
	if k, _ := f.KeyspaceCounts(); k != 0 {
		t.Errorf("%d keys left", k)
	}
}

func bytesToStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}
