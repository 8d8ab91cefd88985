package resp

import "testing"

// TestToRESP3 checks the converter on the shapes it meets: nulls at any
// depth, sets, maps with per-key value shapes, verbatim text, doubles,
// pushes, several replies in one buffer, and bytes it does not understand.
func TestToRESP3(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sh      *shape
		in, out string
	}{
		{"no null: as is", nil, ":-5\r\n+OK\r\n", ":-5\r\n+OK\r\n"},
		{"null bulk", nil, "$-1\r\n", "_\r\n"},
		{"null array", nil, "*-1\r\n", "_\r\n"},
		{"nested nulls", keepShape, "*2\r\n$-1\r\n*1\r\n*-1\r\n", "*2\r\n_\r\n*1\r\n_\r\n"},
		{"-1 inside data is data", nil, "$4\r\n-1\r\n\r\n", "$4\r\n-1\r\n\r\n"},
		{"set", setShape, "*2\r\n$1\r\na\r\n$1\r\nb\r\n", "~2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{"error stays", setShape, "-ERR x\r\n", "-ERR x\r\n"},
		{"map", mapShape, "*2\r\n$1\r\nk\r\n$-1\r\n", "%1\r\n$1\r\nk\r\n_\r\n"},
		{"odd map stays an array", mapShape, "*1\r\n$1\r\nk\r\n", "*1\r\n$1\r\nk\r\n"},
		{"map field shapes", replyShapes["acl|getuser"],
			"*4\r\n$5\r\nflags\r\n*1\r\n$2\r\non\r\n$9\r\nselectors\r\n*1\r\n*2\r\n$4\r\nkeys\r\n$0\r\n\r\n",
			"%2\r\n$5\r\nflags\r\n~1\r\n$2\r\non\r\n$9\r\nselectors\r\n*1\r\n%1\r\n$4\r\nkeys\r\n$0\r\n\r\n"},
		{"verbatim", verbShape, "$3\r\nabc\r\n", "=7\r\ntxt:abc\r\n"},
		{"double", replyShapes["acl|log"], "*1\r\n*2\r\n$11\r\nage-seconds\r\n$5\r\n0.123\r\n",
			"*1\r\n%1\r\n$11\r\nage-seconds\r\n,0.123\r\n"},
		{"pushes, several", pushShape, "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$-1\r\n:0\r\n",
			">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n>3\r\n$9\r\nsubscribe\r\n_\r\n:0\r\n"},
		{"COMMAND INFO: no subcommands is an empty set", &shape{kind: shArray, elems: []*shape{nil, {kind: shArray, emptySet: true}}},
			"*2\r\n$3\r\nget\r\n*0\r\n", "*2\r\n$3\r\nget\r\n~0\r\n"},
		{"not RESP: as is", setShape, "*2\r\n$1\r\na\r\n", "*2\r\n$1\r\na\r\n"},
	} {
		if got := string(toRESP3(nil, []byte(tc.in), tc.sh)); got != tc.out {
			t.Errorf("%s: toRESP3(%q) = %q, want %q", tc.name, tc.in, got, tc.out)
		}
	}
}

// TestRESP2PaysNothing: a RESP2 connection never takes the conversion
// path (no shape is set), and a RESP3 one that says HELLO 2 leaves it.
func TestRESP2PaysNothing(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	c := dial(t, addr)
	if got := c.do("GET", "nosuch"); got != null {
		t.Fatalf("GET = %q", got)
	}
	c.do("HELLO", "3")
	if got := c.do("GET", "nosuch"); got != "_\r\n" {
		t.Fatalf("RESP3 GET = %q", got)
	}
	if got := c.do("HELLO", "2"); got[0] != '*' {
		t.Fatalf("HELLO 2 from RESP3 = %q, want RESP2's array", got)
	}
	if got := c.do("GET", "nosuch"); got != null {
		t.Fatalf("GET after HELLO 2 = %q", got)
	}
}
