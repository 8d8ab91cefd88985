package respwire

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestReadReplyKeepsWireBytes(t *testing.T) {
	for _, raw := range []string{
		"+OK\r\n",
		"-ERR unknown command 'x'\r\n",
		":-12\r\n",
		"$3\r\nabc\r\n",
		"$-1\r\n",
		"$0\r\n\r\n",
		"*-1\r\n",
		"*0\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
		"%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n",
		"_\r\n",
		",3.5\r\n",
		"#t\r\n",
		"(123456789012345678901234567890\r\n",
		"!5\r\nERR x\r\n",
		"=9\r\ntxt:hello\r\n",
		">2\r\n+message\r\n$1\r\nx\r\n",
	} {
		br := bufio.NewReader(strings.NewReader(raw + "+next\r\n"))
		got, err := ReadReply(br, nil)
		if err != nil || string(got) != raw {
			t.Errorf("ReadReply(%q) = %q, %v", raw, got, err)
		}
		next, err := ReadReply(br, nil)
		if err != nil || string(next) != "+next\r\n" {
			t.Errorf("after %q: next reply %q, %v", raw, next, err)
		}
	}
}

func TestReadReplyRefusesMalformed(t *testing.T) {
	small := Limits{MaxBulk: 10, MaxElems: 3, MaxDepth: 2}
	for _, raw := range []string{
		"OK\r\n",
		"+OK\n",
		"$x\r\n",
		"$-2\r\n",
		"$11\r\n",
		"*4\r\n",
		"*1\r\n*1\r\n*1\r\n:1\r\n",
		"$3\r\nabcde",
		"?\r\n",
	} {
		_, err := small.ReadReply(bufio.NewReader(strings.NewReader(raw)), nil)
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("ReadReply(%q) error %v, want a protocol error", raw, err)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"+OK\r\n", "+OK"},
		{"-ERR x\r\n", "-ERR x"},
		{":5\r\n", "5"},
		{"$-1\r\n", "$nil"},
		{"*-1\r\n", "*nil"},
		{"_\r\n", "_nil"},
		{"*2\r\n$1\r\na\r\n*0\r\n", "[a []]"},
		{"%1\r\n+k\r\n:1\r\n", "[+k 1]"},
	} {
		r, err := Parse([]byte(tc.raw))
		if err != nil || r.String() != tc.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", tc.raw, r, err, tc.want)
		}
	}
	if _, err := Parse([]byte("+OK\r\n+extra\r\n")); err == nil {
		t.Error("Parse accepted bytes after the reply")
	}
	if e := MustParse([]byte("-TRYAGAIN later\r\n")).Err(); e == nil || e.(ServerError).Prefix() != "TRYAGAIN" {
		t.Errorf("error reply: %v", e)
	}
}

func TestSplitArray(t *testing.T) {
	parts, err := SplitArray([]byte("*3\r\n+OK\r\n$2\r\nab\r\n*1\r\n:1\r\n"))
	if err != nil || len(parts) != 3 || string(parts[1]) != "$2\r\nab\r\n" || string(parts[2]) != "*1\r\n:1\r\n" {
		t.Fatalf("SplitArray = %q, %v", parts, err)
	}
	if _, err := SplitArray([]byte("+OK\r\n")); err == nil {
		t.Fatal("SplitArray accepted a non-array")
	}
}

func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n+k\r\n_\r\n", "$5\r\nab"} {
		f.Add([]byte(s))
	}
	l := Limits{MaxBulk: 1 << 16, MaxElems: 1 << 10, MaxDepth: 16}
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, err := l.ReadReply(bufio.NewReader(strings.NewReader(string(b))), nil)
		if err != nil {
			return
		}
		if string(raw) != string(b[:len(raw)]) {
			t.Fatalf("raw %q is not a prefix of the input", raw)
		}
		if _, err := Parse(raw); err != nil {
			t.Fatalf("Parse of a reply ReadReply accepted: %v", err)
		}
	})
}
