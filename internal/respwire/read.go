package respwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits bound what one reply may make the reader allocate.
type Limits struct {
	MaxBulk  int // longest bulk string, in bytes
	MaxElems int // most elements in one aggregate
	MaxDepth int // deepest nesting of aggregates
}

// DefaultLimits suit replies between raftset nodes and test clients: a bulk
// up to Redis's proto-max-bulk-len (512 MB) is read, but its buffer grows
// only as bytes arrive, so a lying length costs nothing.
var DefaultLimits = Limits{MaxBulk: 512 << 20, MaxElems: 1 << 24, MaxDepth: 64}

// ErrProtocol marks a reply that is not well-formed RESP.
var ErrProtocol = errors.New("resp protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// ReadReply appends one complete reply, exactly as its wire bytes, to dst.
func ReadReply(br *bufio.Reader, dst []byte) ([]byte, error) {
	return DefaultLimits.ReadReply(br, dst)
}

// ReadReply appends one complete reply, exactly as its wire bytes, to dst,
// within l's bounds.
func (l Limits) ReadReply(br *bufio.Reader, dst []byte) ([]byte, error) {
	return l.read(br, dst, 0)
}

func (l Limits) read(br *bufio.Reader, dst []byte, depth int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return dst, protoErr("reply line too long")
		}
		return dst, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return dst, protoErr("malformed reply line %q", line)
	}
	dst = append(dst, line...)
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return dst, nil
	case '$', '!', '=':
		n, err := length(body, l.MaxBulk)
		if err != nil {
			return dst, err
		}
		if n < 0 {
			return dst, nil
		}
		return readBulk(br, dst, n)
	case '*', '~', '>', '%', '|':
		if depth >= l.MaxDepth {
			return dst, protoErr("reply nested deeper than %d", l.MaxDepth)
		}
		n, err := length(body, l.MaxElems)
		if err != nil {
			return dst, err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if dst, err = l.read(br, dst, depth+1); err != nil {
				return dst, err
			}
		}
		return dst, nil
	}
	return dst, protoErr("unexpected reply type %q", line[0])
}

// readBulk appends n bytes and the CRLF after them, growing dst in steps so
// that a length announced but never sent allocates only what arrived.
func readBulk(br *bufio.Reader, dst []byte, n int) ([]byte, error) {
	const step = 1 << 20
	want := n + 2
	for want > 0 {
		chunk := min(want, step)
		start := len(dst)
		dst = append(dst, make([]byte, chunk)...)
		if _, err := io.ReadFull(br, dst[start:]); err != nil {
			return dst[:start], err
		}
		want -= chunk
	}
	if dst[len(dst)-2] != '\r' || dst[len(dst)-1] != '\n' {
		return dst, protoErr("bulk string not terminated by CRLF")
	}
	return dst, nil
}

// length parses a length field: -1 (null) or 0..limit.
func length(b []byte, limit int) (int, error) {
	n, err := strconv.Atoi(string(b))
	if err != nil || n < -1 {
		return 0, protoErr("bad length %q", b)
	}
	if n > limit {
		return 0, protoErr("length %d over the limit %d", n, limit)
	}
	return n, nil
}

// AppendCommand encodes args as a RESP array of bulk strings.
func AppendCommand(dst []byte, args [][]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}
