//go:build jepsen

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"raftset/integration/check"
)

// reply is one parsed RESP2 reply.
type reply struct {
	kind  byte // '+', '-', ':', '$', '*'
	str   string
	n     int64
	null  bool
	elems []reply
}

func (r reply) isErr() bool { return r.kind == '-' }

// conn is a minimal RESP client: one command at a time, a deadline per
// command, no retries. Any I/O error or timeout closes it for good (a late
// reply must never be read as the answer to the next command).
type conn struct {
	addr    string
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
	broken  bool
}

var errBroken = errors.New("connection already failed")

func dialConn(addr string, timeout time.Duration) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &conn{addr: addr, c: c, r: bufio.NewReader(c), timeout: timeout}, nil
}

func (c *conn) Close() {
	c.broken = true
	c.c.Close()
}

// Do sends one command and reads its reply. An error means the outcome is
// unknown (the request may have been sent); the connection is then closed.
func (c *conn) Do(args ...string) (reply, error) {
	if c.broken {
		return reply{}, errBroken
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.c.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		c.Close()
		return reply{}, err
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		c.Close()
		return reply{}, err
	}
	r, err := readReply(c.r, 0)
	if err != nil {
		c.Close()
		return reply{}, err
	}
	return r, nil
}

func readLine(r *bufio.Reader) (string, error) {
	s, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(s, "\r\n") {
		return "", fmt.Errorf("bad line %q", s)
	}
	return s[:len(s)-2], nil
}

func readReply(r *bufio.Reader, depth int) (reply, error) {
	if depth > 8 {
		return reply{}, errors.New("reply nested too deep")
	}
	line, err := readLine(r)
	if err != nil {
		return reply{}, err
	}
	if line == "" {
		return reply{}, errors.New("empty reply line")
	}
	rep := reply{kind: line[0]}
	body := line[1:]
	switch rep.kind {
	case '+', '-':
		rep.str = body
	case ':':
		rep.n, err = strconv.ParseInt(body, 10, 64)
	case '$':
		n, perr := strconv.Atoi(body)
		if perr != nil || n < -1 || n > 1<<20 {
			return reply{}, fmt.Errorf("bad bulk length %q", body)
		}
		if n == -1 {
			rep.null = true
			break
		}
		buf := make([]byte, n+2)
		if _, err = readFull(r, buf); err != nil {
			return reply{}, err
		}
		rep.str = string(buf[:n])
	case '*':
		n, perr := strconv.Atoi(body)
		if perr != nil || n < -1 || n > 1<<20 {
			return reply{}, fmt.Errorf("bad array length %q", body)
		}
		if n == -1 {
			rep.null = true
			break
		}
		for range n {
			e, err := readReply(r, depth+1)
			if err != nil {
				return reply{}, err
			}
			rep.elems = append(rep.elems, e)
		}
	default:
		return reply{}, fmt.Errorf("unknown reply type %q", line)
	}
	return rep, err
}

func readFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// outcome classifies a reply to a write: ok, fail (certainly not done) or
// info (indeterminate).
type outcome = check.Outcome

const (
	outOK   = check.OK
	outFail = check.Fail
	outInfo = check.Info
)

// classify: -TRYAGAIN is a definite failure; -CLUSTERDOWN, any other error
// reply, a timeout or a connection error is indeterminate for a write.
func classify(r reply, err error) outcome {
	switch {
	case err != nil:
		return outInfo
	case r.isErr() && strings.HasPrefix(r.str, "TRYAGAIN"):
		return outFail
	case r.isErr():
		return outInfo
	}
	return outOK
}
