package testutil

import (
	"bufio"
	"sort"
	"strings"
)

// Reply is a parsed RESP reply: Kind is its type byte ('+', '-', ':', '$',
// '*'), Str the text of a simple, error, integer or bulk reply, Null marks
// $-1 and *-1, and Elems holds an array's elements.
type Reply struct {
	Kind  byte
	Str   string
	Null  bool
	Elems []Reply
}

// ParseReply parses one raw reply as returned by RESPClient.
func ParseReply(raw string) Reply {
	r := bufio.NewReader(strings.NewReader(raw))
	rep, _ := parse(r)
	return rep
}

func parse(r *bufio.Reader) (Reply, bool) {
	line, err := r.ReadString('\n')
	if err != nil || len(line) < 3 {
		return Reply{Kind: '?', Str: line}, false
	}
	kind, body := line[0], strings.TrimSuffix(line[1:], "\r\n")
	switch kind {
	case '$':
		if body == "-1" {
			return Reply{Kind: '$', Null: true}, true
		}
		n := atoi(body)
		buf := make([]byte, n+2)
		if _, err := readFull(r, buf); err != nil {
			return Reply{Kind: '?'}, false
		}
		return Reply{Kind: '$', Str: string(buf[:n])}, true
	case '*', '~':
		if body == "-1" {
			return Reply{Kind: '*', Null: true}, true
		}
		n := atoi(body)
		out := Reply{Kind: '*', Elems: make([]Reply, 0, n)}
		for i := 0; i < n; i++ {
			e, ok := parse(r)
			out.Elems = append(out.Elems, e)
			if !ok {
				return out, false
			}
		}
		return out, true
	default:
		return Reply{Kind: kind, Str: body}, true
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// String renders the reply compactly for messages and comparisons.
func (r Reply) String() string {
	switch {
	case r.Null:
		return string(r.Kind) + "nil"
	case r.Kind == '*':
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, " ") + "]"
	default:
		return string(r.Kind) + r.Str
	}
}

// Sorted returns the reply with its array elements sorted by their rendering,
// for replies whose order Redis leaves unspecified.
func (r Reply) Sorted() Reply {
	if r.Kind != '*' || r.Null {
		return r
	}
	out := Reply{Kind: '*', Elems: append([]Reply(nil), r.Elems...)}
	sort.Slice(out.Elems, func(i, j int) bool { return out.Elems[i].String() < out.Elems[j].String() })
	return out
}
