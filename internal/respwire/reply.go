package respwire

import (
	"bufio"
	"bytes"
	"errors"
	"sort"
	"strings"
)

// Reply is a parsed reply. Kind is its type byte ('+', '-', ':', '$', '*',
// or a RESP3 type such as '~', '%', '_', ','); Str holds the text of a
// simple, error, integer, double or bulk reply; Null marks $-1, *-1 and _;
// Elems holds an aggregate's elements (a map's keys and values alternate).
type Reply struct {
	Kind  byte
	Str   string
	Null  bool
	Elems []Reply
}

// Parse parses one complete reply, as ReadReply returns it. Bytes after the
// reply are an error.
func Parse(raw []byte) (Reply, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	r, err := parse(br)
	if err != nil {
		return r, err
	}
	if br.Buffered() > 0 {
		return r, protoErr("%d bytes after the reply", br.Buffered())
	}
	return r, nil
}

// MustParse is Parse for replies that came from ReadReply, which are
// well-formed by construction; a malformed one parses as Kind '?'.
func MustParse(raw []byte) Reply {
	r, err := Parse(raw)
	if err != nil {
		return Reply{Kind: '?', Str: err.Error()}
	}
	return r
}

func parse(br *bufio.Reader) (Reply, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return Reply{Kind: '?'}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return Reply{Kind: '?'}, protoErr("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', '-', ':', ',', '#', '(':
		return Reply{Kind: kind, Str: string(body)}, nil
	case '_':
		return Reply{Kind: kind, Null: true}, nil
	case '$', '!', '=':
		n, err := length(body, DefaultLimits.MaxBulk)
		if err != nil {
			return Reply{Kind: '?'}, err
		}
		if n < 0 {
			return Reply{Kind: kind, Null: true}, nil
		}
		buf, err := readBulk(br, nil, n)
		if err != nil {
			return Reply{Kind: '?'}, err
		}
		return Reply{Kind: kind, Str: string(buf[:n])}, nil
	case '*', '~', '>', '%', '|':
		n, err := length(body, DefaultLimits.MaxElems)
		if err != nil {
			return Reply{Kind: '?'}, err
		}
		if n < 0 {
			return Reply{Kind: kind, Null: true}, nil
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		out := Reply{Kind: kind, Elems: make([]Reply, 0, min(n, 1024))}
		for range n {
			e, err := parse(br)
			if err != nil {
				return out, err
			}
			out.Elems = append(out.Elems, e)
		}
		return out, nil
	}
	return Reply{Kind: '?'}, protoErr("unexpected reply type %q", kind)
}

// SplitArray splits an array reply into its elements' wire bytes.
func SplitArray(raw []byte) ([][]byte, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) < 3 || line[0] != '*' || line[len(line)-2] != '\r' {
		return nil, protoErr("not an array reply")
	}
	n, err := length(line[1:len(line)-2], DefaultLimits.MaxElems)
	if err != nil || n < 0 {
		return nil, protoErr("not an array reply")
	}
	out := make([][]byte, n)
	for i := range out {
		if out[i], err = ReadReply(br, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// IsError reports whether the reply is an error ('-' or RESP3 '!').
func (r Reply) IsError() bool { return r.Kind == '-' || r.Kind == '!' }

// Err returns the error reply as a Go error, or nil.
func (r Reply) Err() error {
	if r.IsError() {
		return ServerError(r.Str)
	}
	return nil
}

// ServerError is an error reply's text ("ERR ...", "TRYAGAIN ...").
type ServerError string

func (e ServerError) Error() string { return string(e) }

// Prefix is the error's code, its first word ("ERR", "TRYAGAIN").
func (e ServerError) Prefix() string {
	s := string(e)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// Strings returns an aggregate's elements' texts.
func (r Reply) Strings() []string {
	out := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		out[i] = e.Str
	}
	return out
}

// Sorted returns an aggregate's elements' texts, sorted (for set replies).
func (r Reply) Sorted() []string {
	out := r.Strings()
	sort.Strings(out)
	return out
}

// String renders the reply compactly for messages and comparisons:
// "[a b]" for aggregates, "$nil" for a null bulk, "-ERR x" for errors.
func (r Reply) String() string {
	switch {
	case r.Null:
		return string(r.Kind) + "nil"
	case r.Elems != nil || r.Kind == '*' || r.Kind == '~' || r.Kind == '%' || r.Kind == '>':
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, " ") + "]"
	case r.IsError() || r.Kind == '+':
		return string(r.Kind) + r.Str
	default:
		return r.Str
	}
}

var errNotMap = errors.New("not a map-like reply")

// Map returns a map reply's (or a flat key-value array's) pairs as text.
func (r Reply) Map() (map[string]string, error) {
	if len(r.Elems)%2 != 0 {
		return nil, errNotMap
	}
	m := make(map[string]string, len(r.Elems)/2)
	for i := 0; i < len(r.Elems); i += 2 {
		m[r.Elems[i].Str] = r.Elems[i+1].Str
	}
	return m, nil
}
