//go:build unix

package resp

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// watchClose returns a context that is canceled if the client closes its
// connection while the connection's goroutine is blocked in a command
// (WAIT 0 would otherwise wait, and poll other nodes, forever for a client
// that left), and a stop function to call once the command returned. It
// peeks at the socket without consuming anything: bytes the client
// pipelined end the watch without a cancel and are left for redcon.
func (c *client) watchClose(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	sc, ok := socketConn(c.fc.Conn).(syscall.Conn)
	if !ok {
		return ctx, cancel
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		_ = raw.Read(func(fd uintptr) bool {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				return false // nothing yet: wait until readable
			}
			if n == 0 || err != nil {
				cancel() // end of stream or a reset: the client is gone
			}
			return true
		})
	}()
	return ctx, func() {
		_ = c.fc.Conn.SetReadDeadline(time.Now()) // ends raw.Read
		<-done
		_ = c.fc.Conn.SetReadDeadline(time.Time{})
		cancel()
	}
}
