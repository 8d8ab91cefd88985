package resp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"raftset/internal/command"
)

// RDBSource is implemented by a Store that can send its state as an RDB
// file, for SYNC and PSYNC (redis-cli --rdb, raftset backup).
type RDBSource interface {
	// StreamRDB captures a consistent state (after the read barrier), then
	// calls start with the file's exact size and the log index it is
	// consistent with, and writes the file to the writer start returns.
	// An error returned before start was called is the RESP error line to
	// send (without '-'); nothing was written.
	StreamRDB(ctx context.Context, start func(size int64, index uint64) (io.Writer, error)) error
}

// syncWriteTimeout ends a SYNC whose client stopped reading: the capture
// it streams holds copy-on-write state.
const syncWriteTimeout = time.Minute

// replID is the replication id PSYNC answers with: this process's, as a
// restarted Redis gets a new one (a replica cannot continue across it).
var replID = func() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// cmdSync answers SYNC and PSYNC as a Redis primary with disk-based
// replication: [+FULLRESYNC <replid> <offset>] $<len>\r\n<rdb>, the offset
// being the log index the file is consistent with. A PSYNC never continues
// (there is no replication backlog). After the file Redis would stream its
// writes; raftset closes the connection instead, which redis-cli --rdb
// expects (it closes as soon as it has the file).
func (c *client) cmdSync(psync bool) {
	src, ok := c.s.store.(RDBSource)
	if !ok {
		c.write(command.Error("ERR SYNC is not supported by this server"))
		return
	}
	// The replies before SYNC leave first: the file bypasses redcon's buffer.
	if lc, ok := c.rc.(*loopConn); ok {
		if err := lc.wr.Flush(); err != nil {
			c.quit = true
			_ = c.rc.Close()
			return
		}
	}
	started := false
	bw := bufio.NewWriterSize(deadlineWriter{c.fc}, 64<<10)
	err := src.StreamRDB(c.s.ctx, func(size int64, index uint64) (io.Writer, error) {
		started = true
		if psync {
			fmt.Fprintf(bw, "+FULLRESYNC %s %d\r\n", replID, index)
		}
		fmt.Fprintf(bw, "$%d\r\n", size)
		return bw, nil
	})
	if !started {
		c.write(command.Error(err.Error()))
		return
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		c.s.log.Warn("SYNC: sending the RDB file failed", "addr", c.addr, "error", err)
	}
	_ = c.fc.SetWriteDeadline(time.Time{})
	c.quit = true
	_ = c.rc.Close()
}

// deadlineWriter writes to a connection with a fresh write deadline each
// time.
type deadlineWriter struct{ c net.Conn }

func (d deadlineWriter) Write(p []byte) (int, error) {
	_ = d.c.SetWriteDeadline(time.Now().Add(syncWriteTimeout))
	return d.c.Write(p)
}

// cmdReplconf accepts what a replica (or redis-cli --rdb) announces before
// SYNC; none of it changes what SYNC sends.
func cmdReplconf(dst []byte, args [][]byte) []byte {
	if len(args)%2 == 0 {
		return command.AppendError(dst, command.ErrSyntax)
	}
	for i := 1; i < len(args); i += 2 {
		switch strings.ToLower(string(args[i])) {
		case "listening-port", "ip-address", "capa", "rdb-only", "rdb-filter-only", "getack":
		case "ack":
			return dst // a replica's acknowledgement gets no reply
		default:
			return command.AppendError(dst, "ERR Unrecognized REPLCONF option: "+string(args[i]))
		}
	}
	return append(dst, command.OK...)
}
