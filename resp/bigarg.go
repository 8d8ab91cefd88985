package resp

import (
	"crypto/rand"
	"errors"
	"strconv"
)

// Big bulks. redcon's reader keeps a whole command in one buffer that it
// doubles as it fills, then copies the command out: a 300 MB argument cost
// a 512 MB buffer plus a 300 MB copy, and the buffer stayed with the
// connection. So, as Redis does for arguments of PROTO_MBULK_BIG_ARG
// bytes or more, the front end reads such a bulk's data itself, into a
// buffer of exactly its size, and hands redcon a short placeholder in its
// place; the handler puts the buffer back before the command runs. A bulk
// then costs its own size, and nothing of it stays once the command ran.

// bigToken is the placeholder's data. It holds random bytes no client
// knows, so a client cannot send a bulk the handler would mistake for one.
var bigToken = func() []byte {
	b := make([]byte, 24)
	copy(b, "\x00raftset.bigarg\x00")
	_, _ = rand.Read(b[16:])
	return b
}()

// bigHeader is the placeholder's bulk header.
var bigHeader = []byte("$" + strconv.Itoa(len(bigToken)) + "\r\n")

// readBig reads the data of the big bulk whose header ends at buf[k], and
// replaces the header and data with the placeholder in buf.
func (fc *frameConn) readBig(k int, lim frameLimits) error {
	f := &fc.f
	size := f.data
	hs := k - f.headerLen()
	if err := fc.checkQueryBuf(fc.buf, size); err != nil {
		return err
	}
	data := make([]byte, size)
	m := copy(data, fc.buf[k:])
	rest := fc.buf[k+m:]
	for int64(m) < size {
		if fc.rerr != nil {
			return fc.rerr
		}
		n, err := fc.Conn.Read(data[m:])
		fc.in.Add(int64(n))
		m += n
		if err != nil {
			fc.rerr = err
		}
	}
	fc.bigs = append(fc.bigs, data)

	out := make([]byte, 0, hs+len(bigHeader)+len(bigToken)+len(rest))
	out = append(out, fc.buf[:hs]...)
	out = append(out, bigHeader...)
	out = append(out, bigToken...)
	out = append(out, rest...)
	// The framer goes on as if the placeholder had been the data: it
	// expects the bulk's CRLF next.
	f.data = int64(len(bigToken))
	f.size += size - int64(len(bigToken))
	f.scan(bigToken, lim)
	fc.buf, fc.scanned = out, hs+len(bigHeader)+len(bigToken)
	return nil
}

// takeBigArgs puts the big bulks read for a command back in place of their
// placeholders.
func (fc *frameConn) takeBigArgs(args [][]byte) {
	for i, a := range args {
		if len(fc.bigs) == 0 {
			return
		}
		if len(a) == len(bigToken) && string(a) == string(bigToken) {
			args[i] = fc.bigs[0]
			fc.bigs[0] = nil
			fc.bigs = fc.bigs[1:]
		}
	}
	if len(fc.bigs) == 0 {
		fc.bigs = nil
	}
}

// errQueryBufferLimit closes a connection past client-query-buffer-limit.
var errQueryBufferLimit = errors.New("resp: client reached max query buffer length")

// checkQueryBuf disconnects the client when the command being read (plus
// more bytes about to be read) is past client-query-buffer-limit, with
// Redis's log line; b is what was read last, shown as the query's start.
func (fc *frameConn) checkQueryBuf(b []byte, more int64) error {
	if fc.s == nil {
		return nil
	}
	size := fc.f.done
	fc.f.done = 0
	if fc.f.state != stFrame {
		size = max(size, fc.f.size+more)
	}
	limit := fc.s.lim.qbuf.Load()
	if limit <= 0 || size <= limit {
		return nil
	}
	fc.s.lim.qbufDrops.Add(1)
	var info []byte
	if fc.cl != nil {
		info = fc.cl.infoLine(nil)
	}
	fc.s.log.Warn("Closing client that reached max query buffer length: " + string(info) +
		" (qbuf initial bytes: " + strconv.Quote(string(b[:min(len(b), 64)])) + ")")
	fc.perr = "-" // nothing is sent: the connection is just closed
	return errQueryBufferLimit
}
