package fsm

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"raftset/snapshot"
)

// encodingCases are command sequences and the OBJECT ENCODING redis-server
// 7.0 answers after them (cmd/raftset's TestStringEncodingsAgainstRedis
// sends the same sequences to a real one).
var encodingCases = []struct {
	name string
	cmds [][]string
	want string
}{
	{"set int", [][]string{{"set", "k", "123"}}, "int"},
	{"set max int64", [][]string{{"set", "k", "9223372036854775807"}}, "int"},
	{"set min int64", [][]string{{"set", "k", "-9223372036854775808"}}, "int"},
	{"set beyond int64", [][]string{{"set", "k", "9223372036854775808"}}, "embstr"},
	{"set leading zero", [][]string{{"set", "k", "01"}}, "embstr"},
	{"set minus zero", [][]string{{"set", "k", "-0"}}, "embstr"},
	{"set 44 bytes", [][]string{{"set", "k", strings.Repeat("y", 44)}}, "embstr"},
	{"set 45 bytes", [][]string{{"set", "k", strings.Repeat("y", 45)}}, "raw"},
	{"set empty", [][]string{{"set", "k", ""}}, "embstr"},
	{"incr", [][]string{{"set", "k", "5"}, {"incr", "k"}}, "int"},
	{"incr new", [][]string{{"incrby", "k", "-7"}}, "int"},
	{"incr after append", [][]string{{"set", "k", "1"}, {"append", "k", "2"}, {"incr", "k"}}, "int"},
	{"incrbyfloat integer result", [][]string{{"incrbyfloat", "k", "3"}}, "embstr"},
	{"incrbyfloat on int", [][]string{{"set", "k", "5"}, {"incrbyfloat", "k", "1"}}, "embstr"},
	{"append empty to int", [][]string{{"set", "k", "12"}, {"append", "k", ""}}, "raw"},
	{"append new int", [][]string{{"append", "k", "42"}}, "int"},
	{"append new text", [][]string{{"append", "k", "ab"}}, "embstr"},
	{"setrange empty on existing", [][]string{{"set", "k", "hello"}, {"setrange", "k", "0", ""}}, "embstr"},
	{"setrange new", [][]string{{"setrange", "k", "0", "7"}}, "raw"},
	{"setrange existing", [][]string{{"set", "k", "hello"}, {"setrange", "k", "1", "a"}}, "raw"},
	{"getset int", [][]string{{"getset", "k", "77"}}, "int"},
	{"copy raw", [][]string{{"set", "h", "5"}, {"append", "h", "6"}, {"copy", "h", "k"}}, "raw"},
	{"copy int", [][]string{{"set", "h", "5"}, {"copy", "h", "k"}}, "int"},
	{"copy float", [][]string{{"incrbyfloat", "h", "2"}, {"copy", "h", "k"}}, "embstr"},
	{"rename raw", [][]string{{"set", "h", "5"}, {"append", "h", "6"}, {"rename", "h", "k"}}, "raw"},
	{"getex keeps raw", [][]string{{"set", "k", "5"}, {"append", "k", "6"}, {"getex", "k", "px", "100000"}}, "raw"},
	{"set over raw", [][]string{{"append", "k", "x"}, {"append", "k", "y"}, {"set", "k", "9"}}, "int"},
	{"mset", [][]string{{"mset", "k", "12", "j", "x"}}, "int"},
	{"setex", [][]string{{"setex", "k", "100", "-3"}}, "int"},
}

func TestStringEncodings(t *testing.T) {
	for _, tc := range encodingCases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFSM(t)
			for _, c := range tc.cmds {
				doCmd(t, f, 1000, c...)
			}
			if got := doCmd(t, f, 1000, "object", "encoding", "k"); got != bulkOf(tc.want) {
				t.Fatalf("OBJECT ENCODING = %q, want %q", got, tc.want)
			}
			vals := []string{doCmd(t, f, 1000, "get", "k"), doCmd(t, f, 1000, "strlen", "k")}

			// A snapshot carries the encoding and the value.
			g := restored(t, persist(t, f))
			if got := doCmd(t, g, 1000, "object", "encoding", "k"); got != bulkOf(tc.want) {
				t.Fatalf("after a snapshot round trip OBJECT ENCODING = %q, want %q", got, tc.want)
			}
			if got := []string{doCmd(t, g, 1000, "get", "k"), doCmd(t, g, 1000, "strlen", "k")}; got[0] != vals[0] || got[1] != vals[1] {
				t.Fatalf("after a snapshot round trip GET, STRLEN = %q, want %q", got, vals)
			}
			if !bytes.Equal(persist(t, g), persist(t, f)) {
				t.Fatal("the restored state writes a different snapshot")
			}
		})
	}
}

func bulkOf(s string) string { return "$" + itoaTest(len(s)) + "\r\n" + s + "\r\n" }

func itoaTest(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoaTest(n/10) + string(rune('0'+n%10))
}

// An int-encoded string is written to RDB as Redis writes it: what
// rdbSaveLongLongAsStringObject writes for an int object is what
// rdbSaveRawString writes for its text (INT8/16/32, else the digits), so
// the bytes are those of the same value stored as text.
func TestIntStringRDBBytes(t *testing.T) {
	for _, v := range []string{"0", "-1", "127", "-128", "128", "32767", "-32769", "2147483647", "-2147483648",
		"2147483648", "12345678901", "9223372036854775807", "-9223372036854775808"} {
		f := newTestFSM(t)
		doCmd(t, f, 1000, "set", "k", v)
		if enc := doCmd(t, f, 1000, "object", "encoding", "k"); enc != bulkOf("int") {
			t.Fatalf("%s: encoding %q", v, enc)
		}
		got := doCmd(t, f, 1000, "dump", "k")
		want := "$" + itoaTest(len(snapshot.Dump([]byte(v), nil))) + "\r\n" + string(snapshot.Dump([]byte(v), nil)) + "\r\n"
		if got != want {
			t.Fatalf("DUMP of int %s = %q, want %q", v, got, want)
		}
	}
}

// Integers take no bytes beyond their cell: the 16-byte cell holds them.
func TestIntStringsAllocateNothing(t *testing.T) {
	f := newTestFSM(t)
	doCmd(t, f, 1000, "set", "k", "1")
	key := []byte("k")
	c := &execCtx{ks: f.ks, write: true, now: 1000, out: make([]byte, 0, 64)}
	allocs := testing.AllocsPerRun(100, func() {
		f.mu.Lock()
		c.out = c.out[:0]
		incrDecr(c, key, 1)
		f.mu.Unlock()
	})
	if allocs > 0 {
		t.Fatalf("INCR of an int-encoded string allocates %.1f times", allocs)
	}
	if v, ok := f.ks.strInt(f.ks.find([]byte("k"))); !ok || v != 102 { // AllocsPerRun runs it once more to warm up
		t.Fatalf("k = %d (int %v), want 102", v, ok)
	}
}

// Removing most keys rebuilds the tables smaller, keeping every remaining
// key at its position (SCAN cursors and snapshots follow that order).
func TestKeyspaceShrinks(t *testing.T) {
	f := newTestFSM(t)
	const n = 20000
	for i := range n {
		doCmd(t, f, 1000, "set", "key:"+itoaTest(i), "v", "px", "1000000")
	}
	full := f.ks.keys.MemoryUsage() + f.ks.vol.MemoryUsage()
	for i := 0; i < n; i += 10 {
		doCmd(t, f, 1000, "persist", "key:"+itoaTest(i))
	}
	// The dense order a removal leaves: the last key moves into the hole.
	want := order(f)
	for i := range n {
		if i%10 != 0 {
			k := "key:" + itoaTest(i)
			doCmd(t, f, 1000, "del", k)
			p := slices.Index(want, k)
			want[p] = want[len(want)-1]
			want = want[:len(want)-1]
		}
	}
	if got := f.ks.keys.MemoryUsage() + f.ks.vol.MemoryUsage(); got*4 > full {
		t.Fatalf("tables hold %d bytes for %d keys, %d for %d", got, f.ks.Len(), full, n)
	}
	if c := max(cap(f.ks.acct.sz), cap(f.ks.acct.acc)); c*2 > n {
		t.Fatalf("accounting arrays keep room for %d keys after shrinking to %d", c, f.ks.Len())
	}
	checkAccounting(t, f)
	if got := order(f); !slices.Equal(got, want) {
		t.Fatalf("dense order after the rebuilds differs from the removals' order: %v..., want %v...", got[:5], want[:5])
	}
	if got := order(restored(t, persist(t, f))); !slices.Equal(got, want) {
		t.Fatal("a restore orders the keys differently")
	}
	if got := doCmd(t, f, 1000, "get", "key:10"); got != bulkOf("v") {
		t.Fatalf("GET key:10 = %q", got)
	}
	if f.ks.vol.Len() != 0 {
		t.Fatalf("%d keys with a deadline, want 0", f.ks.vol.Len())
	}
	doCmd(t, f, 1000, "flushall")
	if f.ks.peak != 0 {
		t.Fatalf("peak %d after FLUSHALL", f.ks.peak)
	}
}
