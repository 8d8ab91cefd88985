package resp

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/redcon"
)

// The connection loop. redcon's server read each connection through a bufio
// layer into its own buffer and then allocated, per command, a copy of the
// command's bytes and its argument slice (plus the growing command slice):
// with its parsing, about 15% of the server's CPU under a pipelined
// SISMEMBER or SPOP load (docs/benchmarks.md, issue 14). This loop keeps
// redcon's interface (handler, accept and closed callbacks, redcon.Conn,
// redcon's Writer for replies) and its protocol, but reads straight from the
// frameConn and copies a whole pipelined batch once: one byte slice and one
// argument slice per batch. Arguments are never reused afterwards, so a
// command that keeps them (MULTI's queue, WATCH's keys) holds them safely.

// loopServer is the accept loop and the connections it serves.
type loopServer struct {
	handler     func(redcon.Conn, redcon.Command)
	accept      func(redcon.Conn) bool
	closed      func(redcon.Conn, error)
	acceptError func(error)

	mu        sync.Mutex
	conns     map[*loopConn]struct{}
	idleClose time.Duration
}

func newLoopServer(handler func(redcon.Conn, redcon.Command), accept func(redcon.Conn) bool,
	closed func(redcon.Conn, error)) *loopServer {
	return &loopServer{handler: handler, accept: accept, closed: closed, conns: make(map[*loopConn]struct{})}
}

// SetIdleClose closes connections idle for d (0: never); it applies to
// connections accepted afterwards, as redcon's did.
func (s *loopServer) SetIdleClose(d time.Duration) {
	s.mu.Lock()
	s.idleClose = d
	s.mu.Unlock()
}

// serve accepts until ln is closed, then closes every connection.
func (s *loopServer) serve(ln net.Listener) error {
	defer func() {
		_ = ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.conn.Close()
		}
		s.mu.Unlock()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if s.acceptError != nil {
				s.acceptError(err)
			}
			continue
		}
		c := &loopConn{conn: nc, addr: nc.RemoteAddr().String(), wr: redcon.NewWriter(nc)}
		s.mu.Lock()
		c.idleClose = s.idleClose
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		if s.accept != nil && !s.accept(c) {
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		go s.handle(c)
	}
}

// handle is one connection's goroutine: read a batch, hand it to the
// handler, write the replies with one Flush.
func (s *loopServer) handle(c *loopConn) {
	var err error
	defer func() {
		_ = c.conn.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.conns, c)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		s.closed(c, err)
	}()
	for {
		if c.idleClose > 0 {
			_ = c.conn.SetReadDeadline(time.Now().Add(c.idleClose))
		}
		var cmds []redcon.Command
		cmds, err = c.rd.read(c.conn)
		if err != nil {
			var pe protocolError
			if errors.As(err, &pe) {
				c.wr.WriteError("ERR " + err.Error())
				_ = c.wr.Flush()
			}
			return
		}
		c.cmds = cmds
		for len(c.cmds) > 0 {
			cmd := c.cmds[0]
			c.cmds = c.cmds[1:]
			s.handler(c, cmd)
		}
		// The batch's arguments may hold a big bulk (bigarg.go): the
		// reader's reused command slice must not keep it alive.
		clear(cmds)
		if c.closed {
			err = nil
			return
		}
		if err = c.wr.Flush(); err != nil {
			return
		}
	}
}

// loopConn is a served connection, as the handler sees it.
type loopConn struct {
	conn      net.Conn
	wr        *redcon.Writer
	rd        batchReader
	addr      string
	ctx       any
	cmds      []redcon.Command
	closed    bool
	idleClose time.Duration
}

var _ redcon.Conn = (*loopConn)(nil)

func (c *loopConn) Close() error {
	_ = c.wr.Flush()
	c.closed = true
	return c.conn.Close()
}

func (c *loopConn) Context() any                   { return c.ctx }
func (c *loopConn) SetContext(v any)               { c.ctx = v }
func (c *loopConn) SetReadBuffer(int)              {}
func (c *loopConn) WriteString(str string)         { c.wr.WriteString(str) }
func (c *loopConn) WriteBulk(bulk []byte)          { c.wr.WriteBulk(bulk) }
func (c *loopConn) WriteBulkString(bulk string)    { c.wr.WriteBulkString(bulk) }
func (c *loopConn) WriteInt(num int)               { c.wr.WriteInt(num) }
func (c *loopConn) WriteInt64(num int64)           { c.wr.WriteInt64(num) }
func (c *loopConn) WriteUint64(num uint64)         { c.wr.WriteUint64(num) }
func (c *loopConn) WriteError(msg string)          { c.wr.WriteError(msg) }
func (c *loopConn) WriteArray(count int)           { c.wr.WriteArray(count) }
func (c *loopConn) WriteNull()                     { c.wr.WriteNull() }
func (c *loopConn) WriteRaw(data []byte)           { c.wr.WriteRaw(data) }
func (c *loopConn) WriteAny(v any)                 { c.wr.WriteAny(v) }
func (c *loopConn) RemoteAddr() string             { return c.addr }
func (c *loopConn) PeekPipeline() []redcon.Command { return c.cmds }
func (c *loopConn) NetConn() net.Conn              { return c.conn }

func (c *loopConn) WriteBulkFrom(n int64, rb io.Reader) { c.wr.WriteBulkFrom(n, rb) }

func (c *loopConn) ReadPipeline() []redcon.Command {
	cmds := c.cmds
	c.cmds = nil
	return cmds
}

// Detach is part of redcon.Conn; nothing in this package detaches a
// connection from its goroutine.
func (c *loopConn) Detach() redcon.DetachedConn {
	panic("resp: Detach is not supported")
}

// protocolError is a malformed request: answered with -ERR Protocol error,
// then the connection is closed (redcon's texts).
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

const (
	errMultiBulkLength protocolError = "invalid multibulk length"
	errBulkLength      protocolError = "invalid bulk length"
)

// batchReader parses requests out of what the frameConn hands on. The
// framer has already refused what redcon's reader would refuse (but inline
// quoting), so these checks are the same as redcon's and rarely fire.
type batchReader struct {
	buf        []byte
	start, end int
	marks      []int // argument offsets of the batch being parsed, in buf
	counts     []int // arguments per command of the batch
	cmds       []redcon.Command
	inline     []redcon.Command // inline commands of the batch, parsed by redcon
}

const readerMinBuf = 4096

// read returns the next batch: every complete command buffered, reading
// once more whenever none is.
func (rd *batchReader) read(r io.Reader) ([]redcon.Command, error) {
	if rd.buf == nil {
		rd.buf = make([]byte, readerMinBuf)
	}
	for {
		cmds, err := rd.parse()
		if err != nil || len(cmds) > 0 {
			return cmds, err
		}
		if rd.start == rd.end {
			rd.start, rd.end = 0, 0
			if len(rd.buf) > readerMinBuf {
				rd.buf = make([]byte, readerMinBuf)
			}
		} else if rd.end == len(rd.buf) {
			if rd.start > 0 {
				rd.end = copy(rd.buf, rd.buf[rd.start:rd.end])
				rd.start = 0
			} else {
				nb := make([]byte, len(rd.buf)*2)
				copy(nb, rd.buf[:rd.end])
				rd.buf = nb
			}
		}
		n, err := r.Read(rd.buf[rd.end:])
		rd.end += n
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

// parse takes every complete command from the buffer. Commands in RESP form
// are copied out together (one byte slice and one argument slice for the
// whole batch); an inline command goes through redcon's own parser.
func (rd *batchReader) parse() ([]redcon.Command, error) {
	rd.marks, rd.counts, rd.inline = rd.marks[:0], rd.counts[:0], rd.inline[:0]
	b := rd.buf[rd.start:rd.end]
	i := 0
	for i < len(b) {
		if b[i] != '*' {
			nl := indexNL(b[i:])
			if nl < 0 {
				break
			}
			cmd, err := redcon.Parse(append([]byte(nil), b[i:i+nl+1]...))
			i += nl + 1
			if err != nil {
				msg := err.Error()
				if msg == "incomplete command" { // a line without arguments
					continue
				}
				rd.start += i
				if m, ok := strings.CutPrefix(msg, "Protocol error: "); ok {
					return nil, protocolError(m) // unbalanced quotes
				}
				return nil, err
			}
			rd.counts = append(rd.counts, -1-len(rd.inline))
			rd.inline = append(rd.inline, cmd)
			continue
		}
		next, err := rd.multibulk(b, i)
		if err != nil {
			rd.start += i
			return nil, err
		}
		if next < 0 {
			break
		}
		i = next
	}
	used := b[:i]
	rd.start += i
	if len(rd.counts) == 0 {
		return nil, nil
	}
	// Only the arguments are copied, not the framing around them: the
	// framing of a pipelined SADD is 52 of its 124 bytes, and this copy is
	// a fifth of what a write allocates (the 10M-SADD seed profile).
	total := 0
	for k := 0; k < len(rd.marks); k += 2 {
		total += rd.marks[k+1] - rd.marks[k]
	}
	raw := make([]byte, 0, total)
	args := make([][]byte, len(rd.marks)/2)
	for k := range args {
		from := len(raw)
		raw = append(raw, used[rd.marks[2*k]:rd.marks[2*k+1]]...)
		args[k] = raw[from:len(raw):len(raw)]
	}
	rd.cmds = rd.cmds[:0]
	a := 0
	for _, n := range rd.counts {
		if n < 0 {
			rd.cmds = append(rd.cmds, rd.inline[-1-n])
			continue
		}
		// Raw is left empty: nothing in this package reads it.
		rd.cmds = append(rd.cmds, redcon.Command{Args: args[a : a+n : a+n]})
		a += n
	}
	clear(rd.inline)
	return rd.cmds, nil
}

// multibulk parses the command at b[i] ('*'), recording its arguments'
// offsets; it returns the offset after it, or -1 if it is not complete.
func (rd *batchReader) multibulk(b []byte, i int) (int, error) {
	nl := indexNL(b[i:])
	if nl < 0 {
		return -1, nil
	}
	if nl == 0 || b[i+nl-1] != '\r' {
		return 0, errMultiBulkLength
	}
	count, ok := atoi(b[i+1 : i+nl-1])
	if !ok || count <= 0 {
		return 0, errMultiBulkLength
	}
	j := i + nl + 1
	mark := len(rd.marks)
	for range count {
		if j >= len(b) {
			rd.marks = rd.marks[:mark]
			return -1, nil
		}
		if b[j] != '$' {
			return 0, protocolError("expected '$', got '" + string(b[j]) + "'")
		}
		nl := indexNL(b[j:])
		if nl < 0 {
			rd.marks = rd.marks[:mark]
			return -1, nil
		}
		if b[j+nl-1] != '\r' {
			return 0, errBulkLength
		}
		size, ok := atoi(b[j+1 : j+nl-1])
		if !ok || size < 0 {
			return 0, errBulkLength
		}
		data := j + nl + 1
		// Compared without adding to size: a length near 2^63 (which the
		// framer refuses first) must not wrap around.
		if size > len(b)-data-2 {
			rd.marks = rd.marks[:mark]
			return -1, nil
		}
		if b[data+size] != '\r' || b[data+size+1] != '\n' {
			return 0, errBulkLength
		}
		// Offsets in the batch's copy, which starts at b[0].
		rd.marks = append(rd.marks, data, data+size)
		j = data + size + 2
	}
	rd.counts = append(rd.counts, count)
	return j, nil
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// atoi is redcon's parseInt: strconv's syntax, without copying b.
func atoi(b []byte) (int, bool) {
	n, err := strconv.Atoi(unsafe.String(unsafe.SliceData(b), len(b)))
	return n, err == nil
}
