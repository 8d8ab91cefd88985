package resp

import (
	"bytes"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"raftset/internal/command"
)

// Limits on what a client may announce before sending it (Redis's values).
const (
	// MaxMultibulk is the largest argument count a command may have.
	MaxMultibulk = 1024 * 1024
	// maxInline is the longest inline (telnet-style) command line.
	maxInline = 64 * 1024
	// Before authentication (requirepass set) commands are kept small.
	unauthMaxMultibulk = 10
	unauthMaxBulk      = 16384
	// DefaultProtoMaxBulkLen is the default proto-max-bulk-len.
	DefaultProtoMaxBulkLen = 512 * 1024 * 1024
	// bigArg is the size from which a bulk is read into a buffer of its
	// own, as Redis does from PROTO_MBULK_BIG_ARG (bigarg.go).
	bigArg = 32 * 1024
)

// Protocol error texts, as Redis words them (without the leading "ERR ").
const (
	errMultibulkLen       = "Protocol error: invalid multibulk length"
	errBulkLen            = "Protocol error: invalid bulk length"
	errUnauthMultibulkLen = "Protocol error: unauthenticated multibulk length"
	errUnauthBulkLen      = "Protocol error: unauthenticated bulk length"
	errInlineTooBig       = "Protocol error: too big inline request"
)

// errRefused is returned by frameConn.Read once it has refused the stream.
var errRefused = errors.New("resp: protocol error")

// frameLimits are the limits in force for the next header the framer reads.
type frameLimits struct {
	maxBulk int64
	// unauth applies the pre-authentication limits, and makes the framer
	// stop after each AUTH or HELLO command so that the command is run (and
	// may authenticate) before the limits are applied to what follows it.
	unauth bool
	// bigArg > 0 makes the framer stop right after the header of a bulk of
	// at least that many bytes (framer.big), so that its data can be read
	// into a buffer of its own.
	bigArg int64
}

// framer states.
const (
	stFrame     = iota // at the start of a command
	stInline           // inside an inline command line
	stCount            // reading the digits after '*'
	stCountLF          // expecting '\n' after the count
	stDollar           // expecting '$'
	stBulkLen          // reading the digits after '$'
	stBulkLenLF        // expecting '\n' after the bulk length
	stData             // inside bulk data
	stDataCR           // expecting '\r' after bulk data
	stDataLF           // expecting '\n' after bulk data
)

// framer checks a RESP request stream incrementally, byte chunk by byte
// chunk, with O(1) state: it never buffers, and skips bulk data by length.
// It accepts exactly the frames redcon's reader parses (and refuses a few
// that redcon would try to buffer forever).
type framer struct {
	state uint8
	// number being read
	neg   bool
	lead0 bool
	ndig  int
	num   int64
	// position inside a multibulk command
	left  int   // bulks still to come
	data  int64 // bulk bytes still to come
	first bool  // the current bulk is the command name
	line  int   // inline line length so far
	// the command name, when it is short enough to be AUTH or HELLO
	name    [6]byte
	nameLen int // 0..6; 6 means "longer than any name we look for"
	nameEnd bool
	// size is the number of bytes of the current command scanned so far
	// (the client's query buffer, for client-query-buffer-limit).
	size int64
	// done is the size of the largest command completed since it was
	// last reset: one read may bring a whole command past the limit.
	done int64
	// big is set when scan stopped after a big bulk's header (bigArg).
	big bool
}

// scan checks b, the next bytes of the stream. It returns how many bytes may
// be handed on. With perr empty that is len(b), or less when limits.unauth is
// set and an AUTH or HELLO command ends early in b: the rest must be scanned
// again, after that command ran. With perr set, b[n] begins (or continues) an
// invalid command, b[:n] holds only complete commands, and the stream must be
// refused with perr.
func (f *framer) scan(b []byte, lim frameLimits) (n int, perr string) {
	frame := 0 // where in b the current command began (0: earlier)
	f.big = false
	for i := 0; i < len(b); {
		switch f.state {
		case stFrame:
			frame = i
			f.size = -int64(i)
			f.nameLen, f.nameEnd = 0, false
			if b[i] == '*' {
				f.state = stCount
				f.resetNum()
				i++
			} else {
				f.state = stInline
				f.line = 0
			}
		case stInline:
			j := bytes.IndexByte(b[i:], '\n')
			end := len(b)
			if j >= 0 {
				end = i + j
			}
			f.inlineName(b[i:end])
			f.line += end - i
			if f.line > maxInline {
				return frame, errInlineTooBig
			}
			if j < 0 {
				i = len(b)
				continue
			}
			i = end + 1
			f.state = stFrame
			f.done = max(f.done, f.size+int64(i))
			if lim.unauth && f.isAuth() {
				return i, ""
			}
		case stCount, stBulkLen:
			c := b[i]
			i++
			if c == '\r' {
				f.state++
				continue
			}
			if !f.digit(c) {
				if f.state == stCount {
					return frame, errMultibulkLen
				}
				return frame, errBulkLen
			}
		case stCountLF:
			v, ok := f.value()
			if b[i] != '\n' || !ok || v <= 0 || v > MaxMultibulk {
				return frame, errMultibulkLen
			}
			if lim.unauth && v > unauthMaxMultibulk {
				return frame, errUnauthMultibulkLen
			}
			i++
			f.left, f.first, f.state = int(v), true, stDollar
		case stDollar:
			if b[i] != '$' {
				return frame, "Protocol error: expected '$', got '" + string(b[i:i+1]) + "'"
			}
			i++
			f.resetNum()
			f.state = stBulkLen
		case stBulkLenLF:
			v, ok := f.value()
			if b[i] != '\n' || !ok || v < 0 || v > lim.maxBulk {
				return frame, errBulkLen
			}
			if lim.unauth && v > unauthMaxBulk {
				return frame, errUnauthBulkLen
			}
			i++
			f.data, f.state = v, stData
			if f.first && v > int64(len(f.name)-1) {
				f.nameLen = len(f.name)
			}
			if v == 0 {
				f.state = stDataCR
			}
			if lim.bigArg > 0 && v >= lim.bigArg {
				f.big = true
				f.size += int64(i)
				return i, ""
			}
		case stData:
			m := len(b) - i
			if int64(m) > f.data {
				m = int(f.data)
			}
			if f.first && f.nameLen < len(f.name) {
				f.nameLen += copy(f.name[f.nameLen:], b[i:i+m])
			}
			i += m
			f.data -= int64(m)
			if f.data == 0 {
				f.state = stDataCR
			}
		case stDataCR:
			if b[i] != '\r' {
				return frame, errBulkLen
			}
			i++
			f.state = stDataLF
		case stDataLF:
			if b[i] != '\n' {
				return frame, errBulkLen
			}
			i++
			f.first = false
			f.left--
			if f.left > 0 {
				f.state = stDollar
				continue
			}
			f.state = stFrame
			f.done = max(f.done, f.size+int64(i))
			if lim.unauth && f.isAuth() {
				return i, ""
			}
		}
	}
	f.size += int64(len(b))
	return len(b), ""
}

// headerLen is how many bytes of a bulk header the framer has consumed:
// inside one, or (after a stop on a big bulk) all of it.
func (f *framer) headerLen() int {
	sign := 0
	if f.neg {
		sign = 1
	}
	switch {
	case f.state == stBulkLen:
		return 1 + sign + f.ndig
	case f.state == stBulkLenLF:
		return 2 + sign + f.ndig
	case f.big:
		return 3 + sign + f.ndig
	}
	return 0
}

func (f *framer) resetNum() { f.neg, f.lead0, f.ndig, f.num = false, false, 0, 0 }

// digit adds c to the number being read; it reports false for anything a
// strict Redis integer (string2ll) cannot contain there.
func (f *framer) digit(c byte) bool {
	if c == '-' && f.ndig == 0 && !f.neg {
		f.neg = true
		return true
	}
	if c < '0' || c > '9' || f.ndig >= 18 {
		return false
	}
	if f.ndig == 0 && c == '0' {
		f.lead0 = true
	}
	f.ndig++
	f.num = f.num*10 + int64(c-'0')
	return true
}

// value returns the number read; "", "-", "-0" and leading zeros are invalid.
func (f *framer) value() (int64, bool) {
	if f.ndig == 0 || (f.lead0 && (f.ndig > 1 || f.neg)) {
		return 0, false
	}
	if f.neg {
		return -f.num, true
	}
	return f.num, true
}

// inlineName records the first word of an inline line.
func (f *framer) inlineName(seg []byte) {
	for _, c := range seg {
		if f.nameEnd {
			return
		}
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			f.nameEnd = f.nameLen > 0
		case f.nameLen < len(f.name):
			f.name[f.nameLen] = c
			f.nameLen++
		}
	}
}

// isAuth reports whether the command just framed is AUTH or HELLO.
func (f *framer) isAuth() bool {
	n := f.name[:min(f.nameLen, len(f.name))]
	return (len(n) == 4 && bytes.EqualFold(n, []byte("auth"))) ||
		(len(n) == 5 && bytes.EqualFold(n, []byte("hello")))
}

// frameListener wraps each accepted connection in a frameConn.
type frameListener struct {
	net.Listener
	s *Server
}

func (l *frameListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.setKeepAlive(c)
	return newFrameConn(c, l.s), nil
}

// frameConn is the connection the loop reads from (loop.go): every byte
// passes the framer before the loop's reader sees it.
type frameConn struct {
	net.Conn
	s   *Server
	cl  *client // set when the loop accepts the connection
	f   framer
	buf []byte // bytes read but not yet handed on: buf[:scanned] passed the framer
	// scanned is how much of buf passed the framer.
	scanned int
	rerr    error  // read error to report once the bytes before it are used
	perr    string // protocol error to send before closing
	// bigs are the big bulks read (bigarg.go), in order, for the commands
	// handed on and not yet run.
	bigs [][]byte
	fd   int
	in   atomic.Int64 // bytes read
	out  atomic.Int64 // bytes written
	// pushing is set once the connection subscribes: from then on every
	// write takes ps's lock, as messages are written by other goroutines.
	pushing atomic.Bool
	ps      pushState
}

func newFrameConn(c net.Conn, s *Server) *frameConn {
	fc := &frameConn{Conn: c, s: s, fd: -1}
	if sc, ok := socketConn(c).(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { fc.fd = int(fd) })
		}
	}
	return fc
}

func (fc *frameConn) limits() frameLimits {
	lim := frameLimits{maxBulk: DefaultProtoMaxBulkLen}
	if fc.s != nil {
		lim.maxBulk = fc.s.maxBulk.Load()
		lim.unauth = fc.s.authRequired() && (fc.cl == nil || !fc.cl.authed)
		lim.bigArg = bigArg
	}
	return lim
}

// Read hands on the bytes that frame correctly. Only the connection's own
// goroutine calls it, between commands, so the limits always reflect the
// commands that were run before: bytes are scanned only once every byte
// handed on before them was taken, and the loop runs the complete commands it
// holds before it reads again. The socket is read straight into p; only
// bytes that cannot be handed on yet are copied aside (buf).
func (fc *frameConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if fc.scanned > 0 {
			n := copy(p, fc.buf[:fc.scanned])
			fc.buf = fc.buf[n:]
			fc.scanned -= n
			if len(fc.buf) == 0 {
				fc.buf = nil
			}
			return n, nil
		}
		if fc.perr != "" {
			return 0, fc.refuse()
		}
		if fc.rerr != nil && len(fc.buf) == 0 {
			return 0, fc.rerr
		}
		if len(fc.buf) > 0 {
			// A partial header, or bytes after an AUTH: scan them, and
			// read more when they are still only a partial header.
			if err := fc.scanBuf(); err != nil {
				return 0, err
			}
			if fc.scanned > 0 || fc.perr != "" {
				continue
			}
			if fc.rerr != nil {
				return 0, fc.rerr
			}
			fc.readMore()
			continue
		}
		m, err := fc.Conn.Read(p)
		fc.in.Add(int64(m))
		if err != nil {
			if m == 0 {
				return 0, err
			}
			fc.rerr = err
		}
		fc.buf = p[:m]
		if err := fc.scanBuf(); err != nil {
			return 0, err
		}
		if len(fc.buf) > 0 && &fc.buf[0] != &p[0] {
			continue // a big bulk's replacement (bigarg.go) waits in buf
		}
		// The scanned bytes are in place in p; the rest must leave p.
		n := fc.scanned
		fc.buf, fc.scanned = bytes.Clone(fc.buf[n:]), 0
		if len(fc.buf) == 0 {
			fc.buf = nil
		}
		if n > 0 {
			return n, nil
		}
	}
}

// readMore reads from the socket after the bytes kept in buf.
func (fc *frameConn) readMore() {
	if cap(fc.buf)-len(fc.buf) < 512 {
		fc.buf = append(make([]byte, 0, len(fc.buf)+4096), fc.buf...)
	}
	m, err := fc.Conn.Read(fc.buf[len(fc.buf):cap(fc.buf)])
	fc.in.Add(int64(m))
	fc.buf = fc.buf[:len(fc.buf)+m]
	if err != nil {
		fc.rerr = err
	}
}

// scanBuf passes the unscanned bytes of buf through the framer. A partial
// bulk header is kept back (rescanned once complete), so that a big bulk's
// header is never handed on before its data can be taken out (bigarg.go).
func (fc *frameConn) scanBuf() error {
	lim := fc.limits()
	b := fc.buf
	k, perr := fc.f.scan(b, lim)
	switch {
	case perr != "":
		fc.perr = perr
		fc.buf, fc.scanned = b[:k], k
		return nil
	case fc.f.big:
		return fc.readBig(k, lim)
	}
	if h := fc.f.headerLen(); h > 0 && lim.bigArg > 0 {
		fc.f.state = stDollar
		fc.f.resetNum()
		fc.f.size -= int64(h)
		k -= h
	}
	fc.scanned = k
	return fc.checkQueryBuf(b, 0)
}

// refuse writes the protocol error straight to the socket (the loop flushed
// every earlier reply before reading again) and fails the read, which makes
// the loop close the connection.
func (fc *frameConn) refuse() error {
	msg := fc.perr
	if msg != "-" {
		fc.perr = "-" // sent
		_ = fc.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = fc.Write(command.AppendError(nil, "ERR "+msg))
		if fc.s != nil {
			fc.s.log.Debug("protocol error, closing connection", "addr", fc.RemoteAddr(), "error", msg)
		}
	}
	return errRefused
}

func (fc *frameConn) Write(p []byte) (int, error) {
	if fc.pushing.Load() {
		return fc.writeSubscribed(p)
	}
	n, err := fc.Conn.Write(p)
	fc.out.Add(int64(n))
	return n, err
}
