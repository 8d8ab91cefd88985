package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"raftset/internal/respwire"
)

// The generator is one event loop on one OS thread, as redis-benchmark is:
// epoll over the connections and a timerfd for the next send that is due.
// Goroutines sleeping in time.Sleep, as it first was, wake through the Go
// runtime's network poller, whose timeout has millisecond resolution (a
// 300 µs sleep took 1.1 ms here): sends due at different times left
// together, once a millisecond, so the "open loop" was a train of bursts;
// and waking a goroutine per send cost more CPU than the sends themselves,
// on a machine whose two CPUs the generator shares with the servers
// (docs/benchmarks.md, "The latency rows' arrivals come in bursts").

// lconn is one connection of the loop.
type lconn struct {
	fd       int
	next     time.Duration // when its next request is due, since the loop's start
	inflight bool
	from     time.Duration // the in-flight request's latency origin
	rbuf     []byte
	rng      *rand.Rand
	dead     bool
}

// run offers the load and returns every request's latency, the number of
// error replies and failed connections, and how long the load lasted.
func run(cfg config) ([]time.Duration, int, time.Duration, error) {
	runtime.LockOSThread()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("epoll: %w", err)
	}
	defer unix.Close(ep)
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("timerfd: %w", err)
	}
	defer unix.Close(tfd)
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, tfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(tfd)}); err != nil {
		return nil, 0, 0, fmt.Errorf("epoll timerfd: %w", err)
	}

	interval := time.Duration(float64(cfg.conns) / cfg.rate * float64(time.Second))
	conns := make([]*lconn, cfg.conns)
	byFd := map[int32]*lconn{}
	for i := range conns {
		fd, err := dialFd(cfg.addr)
		if err != nil {
			return nil, 0, 0, err
		}
		defer unix.Close(fd)
		// Connections start staggered across one interval.
		c := &lconn{fd: fd, next: interval * time.Duration(i) / time.Duration(cfg.conns),
			rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
		conns[i], byFd[int32(fd)] = c, c
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return nil, 0, 0, fmt.Errorf("epoll conn: %w", err)
		}
	}

	base := time.Now().Add(50 * time.Millisecond)
	end := cfg.dur
	// Requests in flight at the end get this long to be answered.
	drain := end + time.Second
	var lat []time.Duration
	errs := 0
	var req []byte
	reqs := requestMaker{args: cfg.args, keyspace: cfg.keyspace}
	var replies replyScanner
	// kill ends a connection that failed: out of epoll, where a closed
	// socket would stay readable and spin the loop.
	kill := func(c *lconn) {
		c.dead = true
		errs++
		_ = unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
	send := func(c *lconn, from time.Duration) {
		req = reqs.append(req[:0], c.rng)
		if err := writeAll(c.fd, req); err != nil {
			kill(c)
			return
		}
		c.inflight, c.from = true, from
	}
	events := make([]unix.EpollEvent, len(conns)+1)
	buf := make([]byte, 64<<10)
	for {
		now := time.Since(base)
		if now >= drain {
			// Still unanswered a second after the end: errors.
			for _, c := range conns {
				if c.inflight && !c.dead {
					errs++
				}
			}
			break
		}
		// Send what is due on idle connections; arm the timer for the
		// earliest of the rest.
		wake := time.Duration(-1)
		active := false
		for _, c := range conns {
			if c.dead || c.next >= end {
				active = active || (c.inflight && !c.dead)
				continue
			}
			active = true
			if c.inflight {
				continue
			}
			if t := time.Since(base); c.next <= t {
				// Woken late by the loop itself (or by its earlier
				// sends): the lateness is the generator's, not the
				// server's.
				send(c, t)
				continue
			}
			if wake < 0 || c.next < wake {
				wake = c.next
			}
		}
		if !active {
			break
		}
		if wake >= 0 {
			d := max(wake-time.Since(base), time.Microsecond)
			ts := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
			if err := unix.TimerfdSettime(tfd, 0, &ts, nil); err != nil {
				return nil, errs, 0, fmt.Errorf("timerfd: %w", err)
			}
		}
		n, err := epollWait(ep, events, int(min(drain-now, time.Second)/time.Millisecond)+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return nil, errs, 0, fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range events[:max(n, 0)] {
			if int(ev.Fd) == tfd {
				var b [8]byte
				_, _ = rawRead(tfd, b[:])
				continue
			}
			c := byFd[ev.Fd]
			if c == nil || c.dead {
				continue
			}
			r, err := rawRead(c.fd, buf)
			if r <= 0 {
				if err == unix.EAGAIN {
					continue
				}
				kill(c) // closed by the server, or broken
				continue
			}
			c.rbuf = append(c.rbuf, buf[:r]...)
			for c.inflight {
				size, isErr, err := replies.next(c.rbuf)
				if err != nil {
					kill(c) // not RESP
					break
				}
				if size == 0 {
					break // incomplete
				}
				c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[size:])]
				if isErr {
					errs++
				}
				now := time.Since(base)
				lat = append(lat, now-c.from)
				c.inflight = false
				c.next += interval
				if c.next < end && c.next <= now {
					// Behind schedule (the reply came late): the wait
					// for it counts.
					send(c, c.next)
				}
			}
		}
	}
	return lat, errs, time.Since(base), nil
}

// The loop's system calls are raw ones. Through the runtime's usual path, a
// call of more than 20 µs (a loopback write does the receiver's TCP work;
// a wait for events) lets sysmon hand the P to another thread, and the
// loop's thread must get one back when the call returns: the futex
// wake-ups and sysmon's nanosleeps cost more CPU than the loop's own work
// (cluster/walsync.go meets the same with fsync). The loop is the
// process's only work, and its sockets are non-blocking, so holding the P
// costs nothing; a garbage collection's stop-the-world waits for a wait
// to end, which the timer bounds.
func epollWait(ep int, events []unix.EpollEvent, msec int) (int, error) {
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), uintptr(msec), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// writeAll writes b whole; a request larger than the socket's free buffer
// waits for room (poll), holding up the loop as a blocking write would.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			b = b[n:]
		case unix.EINTR:
		case unix.EAGAIN:
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if _, err := unix.Poll(pfd, 1000); err != nil && err != unix.EINTR {
				return err
			}
		default:
			return errno
		}
	}
	return nil
}

func rawRead(fd int, b []byte) (int, error) {
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
}

// dialFd connects to addr and returns a non-blocking socket of its own.
func dialFd(addr string) (int, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return -1, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	f, err := conn.(*net.TCPConn).File()
	if err != nil {
		return -1, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return -1, fmt.Errorf("dial %s: %w", addr, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("dial %s: %w", addr, err)
	}
	return fd, nil
}

// replyScanner finds complete replies in a connection's buffer, reusing
// its reader and scratch across replies (the loop is one goroutine).
type replyScanner struct {
	src bytes.Reader
	br  *bufio.Reader
	raw []byte
}

// next returns the length of the complete reply at the start of b (0 while
// it is incomplete) and whether it is an error reply. It parses from the
// start on each call: replies to the commands this is for are small.
func (s *replyScanner) next(b []byte) (size int, isErr bool, err error) {
	if len(b) == 0 {
		return 0, false, nil
	}
	s.src.Reset(b)
	// A line must fit the reader's buffer (bufio.ErrBufferFull otherwise).
	if s.br == nil || s.br.Size() < len(b)+16 {
		s.br = bufio.NewReaderSize(&s.src, max(len(b)+16, 4096))
	} else {
		s.br.Reset(&s.src)
	}
	s.raw, err = respwire.ReadReply(s.br, s.raw[:0])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, false, nil
		}
		return 0, false, err
	}
	return len(s.raw), s.raw[0] == '-', nil
}

// requestMaker encodes the command line's request, each argument holding
// __rand_int__ given one random number below keyspace in its place (twelve
// digits, as redis-benchmark), reusing its scratch across requests.
type requestMaker struct {
	args     []string
	keyspace int
	scratch  []byte
	ends     []int
	argv     [][]byte
}

const randToken = "__rand_int__"

func (m *requestMaker) append(dst []byte, rng *rand.Rand) []byte {
	m.scratch, m.ends = m.scratch[:0], m.ends[:0]
	for _, a := range m.args {
		if strings.Contains(a, randToken) {
			v := rng.IntN(m.keyspace)
			for {
				i := strings.Index(a, randToken)
				if i < 0 {
					break
				}
				m.scratch = appendPadded(append(m.scratch, a[:i]...), v)
				a = a[i+len(randToken):]
			}
		}
		m.scratch = append(m.scratch, a...)
		m.ends = append(m.ends, len(m.scratch))
	}
	m.argv = m.argv[:0]
	from := 0
	for _, end := range m.ends {
		m.argv = append(m.argv, m.scratch[from:end])
		from = end
	}
	return respwire.AppendCommand(dst, m.argv)
}

// appendPadded appends v in decimal, zero-padded to twelve digits (%012d).
func appendPadded(dst []byte, v int) []byte {
	if v >= 1e12 {
		return strconv.AppendInt(dst, int64(v), 10)
	}
	var b [12]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, b[:]...)
}
