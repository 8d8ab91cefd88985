// Command looproto asks one question of issue 14's remaining write rows:
// how much CPU per request would an event loop of our own save over a
// goroutine per connection? It serves any command with ":1" after a
// simulated group commit (every request queued meanwhile waits for one
// write+fdatasync of a file, as a sole voter's log does), in one of two
// connection models:
//
//   - goroutines: raftset's model. A goroutine per connection reads a
//     pipeline, queues it, parks until its commit, writes the replies and
//     reads again (the read after the replies finds nothing and parks in
//     Go's netpoller).
//   - epoll: Redis's model. One goroutine waits on an epoll set of every
//     connection, reads the ready ones and queues their pipelines; the
//     committer writes each connection's replies itself after the fsync.
//
// No Raft, no state machine: the difference between the two is the price
// of the connection model alone. bench/looproto.sh runs redis-benchmark
// against both and redis-server (appendfsync always) and prints CPU-seconds
// per million requests.
//
//	go run ./bench/looproto -addr 127.0.0.1:7000 -mode epoll
package main

import (
	"bytes"
	"flag"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7000", "listen address")
	mode := flag.String("mode", "goroutines", "connection model: goroutines or epoll")
	dir := flag.String("dir", os.TempDir(), "where the simulated log file is written")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.CreateTemp(*dir, "looproto-log-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	c := &committer{log: f}
	c.cond = sync.NewCond(&c.mu)
	go c.run()
	switch *mode {
	case "goroutines":
		serveGoroutines(ln, c)
	case "epoll":
		serveEpoll(ln, c)
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
}

// pending is one connection's pipeline waiting for a commit: the
// goroutine model waits on done, the epoll model has the committer write
// to fd.
type pending struct {
	n    int
	done chan struct{}
	fd   int
}

type committer struct {
	log   *os.File
	mu    sync.Mutex
	cond  *sync.Cond
	queue []pending
}

func (c *committer) submit(p pending) {
	c.mu.Lock()
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	c.cond.Signal()
}

// run commits whatever queued during the previous fsync, as the proposer
// and a sole voter's log store do together.
func (c *committer) run() {
	var spare []pending
	rec := make([]byte, 64)
	var replies []byte
	for {
		c.mu.Lock()
		for len(c.queue) == 0 {
			c.cond.Wait()
		}
		q := c.queue
		c.queue = spare[:0]
		c.mu.Unlock()
		if _, err := c.log.Write(rec); err != nil {
			log.Fatal(err)
		}
		if err := syscall.Fdatasync(int(c.log.Fd())); err != nil {
			log.Fatal(err)
		}
		for _, p := range q {
			if p.done != nil {
				p.done <- struct{}{}
				continue
			}
			replies = appendReplies(replies[:0], p.n)
			// A connection gone meanwhile fails here (the loop closes it);
			// were its descriptor reused by then, the new one would get a
			// stray reply: a measuring tool for redis-benchmark's fixed
			// connections, not a server.
			_, _ = syscall.Write(p.fd, replies)
		}
		spare = q
	}
}

func appendReplies(b []byte, n int) []byte {
	for range n {
		b = append(b, ":1\r\n"...)
	}
	return b
}

// commands counts the whole RESP arrays at the start of b and the bytes
// they take; a partial one is left for the next read.
func commands(b []byte) (n, used int) {
	for {
		m := command(b[used:])
		if m == 0 {
			return n, used
		}
		n++
		used += m
	}
}

func command(b []byte) int {
	if len(b) == 0 || b[0] != '*' {
		return 0
	}
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 {
		return 0
	}
	args, err := strconv.Atoi(string(b[1:i]))
	if err != nil {
		return 0
	}
	pos := i + 2
	for range args {
		j := bytes.Index(b[pos:], []byte("\r\n"))
		if j < 0 || b[pos] != '$' {
			return 0
		}
		size, err := strconv.Atoi(string(b[pos+1 : pos+j]))
		if err != nil {
			return 0
		}
		pos += j + 2 + size + 2
		if pos > len(b) {
			return 0
		}
	}
	return pos
}

func serveGoroutines(ln net.Listener, c *committer) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer conn.Close()
			buf := make([]byte, 64<<10)
			have := 0
			done := make(chan struct{}, 1)
			var replies []byte
			for {
				r, err := conn.Read(buf[have:])
				if err != nil {
					return
				}
				have += r
				n, used := commands(buf[:have])
				have = copy(buf, buf[used:have])
				if n == 0 {
					continue
				}
				c.submit(pending{n: n, done: done})
				<-done
				replies = appendReplies(replies[:0], n)
				if _, err := conn.Write(replies); err != nil {
					return
				}
			}
		}()
	}
}

func serveEpoll(ln net.Listener, c *committer) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	bufs := map[int]*connBuf{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				log.Fatal(err)
			}
			// A duplicate descriptor of our own, non-blocking: Go's
			// netpoller keeps the original and never reads it.
			f, err := conn.(*net.TCPConn).File()
			if err != nil {
				log.Fatal(err)
			}
			fd := int(f.Fd())
			if err := syscall.SetNonblock(fd, true); err != nil {
				log.Fatal(err)
			}
			mu.Lock()
			bufs[fd] = &connBuf{conn: conn, file: f, buf: make([]byte, 64<<10)}
			mu.Unlock()
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
			if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
				log.Fatal(err)
			}
		}
	}()
	events := make([]syscall.EpollEvent, 128)
	for {
		k, err := syscall.EpollWait(ep, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, ev := range events[:k] {
			fd := int(ev.Fd)
			mu.Lock()
			cb := bufs[fd]
			mu.Unlock()
			r, err := syscall.Read(fd, cb.buf[cb.have:])
			if err == syscall.EAGAIN {
				continue
			}
			if err != nil || r == 0 {
				_ = syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, fd, nil)
				mu.Lock()
				delete(bufs, fd)
				mu.Unlock()
				cb.file.Close()
				cb.conn.Close()
				continue
			}
			cb.have += r
			n, used := commands(cb.buf[:cb.have])
			cb.have = copy(cb.buf, cb.buf[used:cb.have])
			if n > 0 {
				c.submit(pending{n: n, fd: fd})
			}
		}
	}
}

type connBuf struct {
	conn net.Conn
	file *os.File
	buf  []byte
	have int
}

func init() {
	log.SetPrefix(filepath.Base(os.Args[0]) + ": ")
	log.SetFlags(0)
}
