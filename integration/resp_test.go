//go:build jepsen

package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"raftset/integration/check"
	"raftset/internal/respwire"
)

// reply is one parsed reply; an integer reply's digits are in Str (intOf
// reads them).
type reply = respwire.Reply

// conn is the harness's client: respwire's, one command at a time, one
// deadline per command covering the write and the read, no retries. Any I/O
// error or timeout closes it for good: a late reply must never be read as
// the answer to the next command, and a Jepsen client that retried would
// turn one indeterminate operation into two.
type conn struct {
	c      *respwire.Client
	broken bool
}

var errBroken = errors.New("connection already failed")

func dialConn(addr string, timeout time.Duration) (*conn, error) {
	c, err := respwire.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &conn{c: c}, nil
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
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	raw, err := c.c.Call(context.Background(), b)
	if err != nil {
		c.Close()
		return reply{}, err
	}
	r, err := respwire.Parse(raw)
	if err != nil {
		c.Close()
		return reply{}, err
	}
	return r, nil
}

// intOf is an integer reply's value.
func intOf(r reply) (int64, error) {
	if r.Kind != ':' {
		return 0, fmt.Errorf("unexpected reply %q", r.Str)
	}
	n, err := strconv.ParseInt(r.Str, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad integer reply %q", r.Str)
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

// classify: -TRYAGAIN is a definite failure, and so is -MOVED (the front end
// answers it before proposing, the state machine refuses a slot it does not
// own: the write was not applied); -CLUSTERDOWN, any other error reply, a
// timeout or a connection error is indeterminate for a write.
func classify(r reply, err error) outcome {
	switch {
	case err != nil:
		return outInfo
	case r.IsError() && (strings.HasPrefix(r.Str, "TRYAGAIN") || strings.HasPrefix(r.Str, "MOVED ")):
		return outFail
	case r.IsError():
		return outInfo
	}
	return outOK
}

// movedTo is the address a -MOVED reply names ("" for any other reply).
func movedTo(r reply) string {
	if !r.IsError() || !strings.HasPrefix(r.Str, "MOVED ") {
		return ""
	}
	f := strings.Fields(r.Str)
	if len(f) != 3 {
		return ""
	}
	return f[2]
}

// errNotSent: the redirect's connection could not be opened, so the
// command was certainly not sent there.
var errNotSent = errors.New("redirect not sent")

// redirect sends args once to the node a -MOVED reply named, on a
// connection of its own, as a cluster client follows a redirect; it does
// not follow a second one. An error wrapping errNotSent means the command
// never left.
func redirect(addr string, timeout time.Duration, args []string) (reply, error) {
	c, err := dialConn(addr, timeout)
	if err != nil {
		return reply{}, fmt.Errorf("%w: dial %s: %v", errNotSent, addr, err)
	}
	defer c.Close()
	return c.Do(args...)
}

// doFollow sends args to addr and follows one -MOVED: the harness's own
// reads (readiness, final reads) on a sharded cluster, where a node
// redirects keys of shards it does not lead.
func doFollow(addr string, timeout time.Duration, args ...string) (reply, error) {
	c, err := dialConn(addr, timeout)
	if err != nil {
		return reply{}, err
	}
	r, err := c.Do(args...)
	c.Close()
	if to := movedTo(r); err == nil && to != "" {
		return redirect(to, timeout, args)
	}
	return r, err
}
