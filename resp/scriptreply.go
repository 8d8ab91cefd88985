package resp

import (
	"bytes"
	"strconv"

	"raftset/internal/command"
)

// A script's reply may hold RESP3 types (internal/script's resp3.go: a
// returned table with a map, set, double, big_number or verbatim_string
// field, booleans after redis.setresp(3)): the state machine builds it as
// Redis builds it for a RESP3 client. For a RESP2 client those types become
// RESP2's as Redis's addReply functions write them: a map is a flat array,
// a set an array, a double, big number or verbatim string (without its
// format) a bulk string, true 1 and false 0, a null the null bulk string.

// scriptShape marks, on a RESP2 connection, the reply of a script command
// (or of an EXEC that queued one): it is downgraded before it is written.
var scriptShape = &shape{kind: shScript2}

// resp2Shape is the reply shape of spec on a connection that is not
// special: nil, except for what can return a script's RESP3 types.
func (c *client) resp2Shape(spec *command.Spec) *shape {
	switch {
	case spec.Group == "scripting":
		return scriptShape
	case spec.Name == "exec":
		for _, q := range c.queue {
			if q.spec.Group == "scripting" {
				return scriptShape
			}
		}
	}
	return nil
}

// toRESP2 appends src (complete replies) to dst with RESP3 types made
// RESP2's. Replies without them are copied as they are.
func toRESP2(dst, src []byte) []byte {
	if !hasRESP3(src) {
		return append(dst, src...)
	}
	for len(src) > 0 {
		start := len(dst)
		var ok bool
		dst, src, ok = downgrade(dst, src)
		if !ok {
			return append(dst[:start], src...)
		}
	}
	return dst
}

// hasRESP3 reports whether the replies in src may hold a RESP3 type: a
// line that starts with one of their type bytes (a cheap test that may say
// yes for bulk data that looks like one).
func hasRESP3(src []byte) bool {
	for i := 0; i < len(src); {
		switch src[i] {
		case '%', '~', ',', '(', '=', '#', '_':
			return true
		}
		nl := bytes.IndexByte(src[i:], '\n')
		if nl < 0 {
			return false
		}
		i += nl + 1
	}
	return false
}

// downgrade converts the first reply of src.
func downgrade(dst, src []byte) ([]byte, []byte, bool) {
	nl := bytes.IndexByte(src, '\n')
	if nl < 2 || src[nl-1] != '\r' {
		return dst, src, false
	}
	line, text, rest := src[:nl+1], src[1:nl-1], src[nl+1:]
	switch src[0] {
	case '$', '=':
		n, err := strconv.Atoi(string(text))
		if err != nil {
			return dst, src, false
		}
		if n < 0 {
			return append(dst, line...), rest, true
		}
		if len(rest) < n+2 {
			return dst, src, false
		}
		data := rest[:n]
		if src[0] == '=' {
			if n < 4 {
				return dst, src, false
			}
			data = data[4:] // the format and its colon
		}
		dst = command.AppendBulk(dst, data)
		return dst, rest[n+2:], true
	case ',', '(':
		return command.AppendBulk(dst, text), rest, true
	case '#':
		if len(text) == 1 && text[0] == 't' {
			return append(dst, ":1\r\n"...), rest, true
		}
		return append(dst, ":0\r\n"...), rest, true
	case '_':
		return append(dst, "$-1\r\n"...), rest, true
	case '*', '%', '~':
		n, err := strconv.Atoi(string(text))
		if err != nil {
			return dst, src, false
		}
		if n < 0 {
			return append(dst, line...), rest, true
		}
		count := n
		if src[0] == '%' {
			count = 2 * n
		}
		dst = command.AppendArray(dst, count)
		for i := 0; i < count; i++ {
			var ok bool
			if dst, rest, ok = downgrade(dst, rest); !ok {
				return dst, src, false
			}
		}
		return dst, rest, true
	}
	return append(dst, line...), rest, true
}
