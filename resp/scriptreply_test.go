package resp

import "testing"

// TestToRESP2: a script's RESP3 types as Redis writes them to a RESP2
// client; replies without them are copied.
func TestToRESP2(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{":1\r\n$2\r\nab\r\n", ":1\r\n$2\r\nab\r\n"},
		{"$5\r\n%1\r\n_\r\n", "$5\r\n%1\r\n_\r\n"}, // looks like RESP3 inside a bulk string
		{"%1\r\n$1\r\na\r\n~2\r\n:1\r\n#f\r\n", "*2\r\n$1\r\na\r\n*2\r\n:1\r\n:0\r\n"},
		{",3.5\r\n", "$3\r\n3.5\r\n"},
		{"(123\r\n", "$3\r\n123\r\n"},
		{"=9\r\ntxt:hello\r\n", "$5\r\nhello\r\n"},
		{"#t\r\n", ":1\r\n"},
		{"_\r\n", "$-1\r\n"},
		{"*3\r\n_\r\n,inf\r\n*-1\r\n", "*3\r\n$-1\r\n$3\r\ninf\r\n*-1\r\n"},
		{"-ERR x\r\n", "-ERR x\r\n"},
		{"%1\r\n$1\r\na\r\n:5\r\n", "*2\r\n$1\r\na\r\n:5\r\n"},
		{"~2\r\n:1\r\n", "~2\r\n:1\r\n"}, // truncated: sent as it is
	} {
		if got := string(toRESP2(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("toRESP2(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
