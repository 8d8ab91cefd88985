package cluster

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/testutil"
)

// dialMember opens a RESP connection to a member's front end, closed at
// cleanup.
func dialMember(t *testing.T, m *member) *testutil.RESPClient {
	t.Helper()
	cl, err := testutil.DialRESP(m.cfg.ClientAddr, 15*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", m.id, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func mustDo(t *testing.T, cl *testutil.RESPClient, want string, args ...string) {
	t.Helper()
	got, err := cl.Do(args...)
	if err != nil || got != want {
		t.Fatalf("%q = %q, %v; want %q", args, got, err, want)
	}
}

// isolateMember cuts m's Raft transport off from every other member, both
// ways; its front end keeps answering.
func (c *servedCluster) isolateMember(m *member) {
	m.trans.DisconnectAll()
	for _, o := range c.members {
		if o != m && o.trans != nil {
			o.trans.Disconnect(raft.ServerAddress(m.id))
		}
	}
}

// reconnectMember undoes isolateMember.
func (c *servedCluster) reconnectMember(m *member) {
	for _, o := range c.members {
		if o != m && o.srv != nil {
			m.trans.Connect(raft.ServerAddress(o.id), o.trans)
			o.trans.Connect(raft.ServerAddress(m.id), m.trans)
		}
	}
}

// silentListener accepts connections on addr and never answers, until the
// test ends.
type silentListener struct {
	accepted atomic.Int32
}

func listenSilently(t *testing.T, addr string) *silentListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	s := &silentListener{}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return s
}

// WAIT counts the members that applied the connection's last write: one
// that is reachable but cut off from Raft is not counted until it catches
// up, and one that is stopped is not counted at all.
func TestWaitCountsMembersThatApplied(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	c.published()
	cl := dialMember(t, l)
	// Before any write: every reachable member (Redis: replicas with an
	// offset >= 0).
	mustDo(t, cl, ":2\r\n", "WAIT", "2", "0")
	mustDo(t, cl, ":1\r\n", "SADD", "s", "a")
	mustDo(t, cl, ":2\r\n", "WAIT", "2", "0")

	behind, other := c.followers(l)[0], c.followers(l)[1]
	c.isolateMember(behind)
	mustDo(t, cl, ":1\r\n", "SADD", "s", "b")
	mustDo(t, cl, ":1\r\n", "WAIT", "1", "0")
	start := time.Now()
	mustDo(t, cl, ":1\r\n", "WAIT", "2", "300")
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("WAIT 2 300 answered after %s, before its timeout", el)
	}
	// A connection that wrote nothing counts it: it is reachable.
	mustDo(t, dialMember(t, l), ":2\r\n", "WAIT", "2", "0")

	// Once it catches up it counts: WAIT 2 0 blocks until then.
	c.reconnectMember(behind)
	mustDo(t, cl, ":2\r\n", "WAIT", "2", "0")

	other.stop()
	mustDo(t, cl, ":1\r\n", "WAIT", "2", "200")
	// A member that accepts connections but never answers (a paused
	// process) is not counted, and does not hold up a WAIT the others
	// satisfy beyond firstRoundWait.
	silent := listenSilently(t, other.cfg.ClientAddr)
	start = time.Now()
	mustDo(t, cl, ":1\r\n", "WAIT", "1", "0")
	if el := time.Since(start); el >= appliedQueryTimeout {
		t.Errorf("WAIT 1 0 with a silent member took %s", el)
	}
	mustDo(t, cl, ":1\r\n", "WAIT", "2", "300")
	if silent.accepted.Load() == 0 {
		t.Errorf("WAIT never asked the silent member")
	}
	mustDo(t, cl, "-ERR timeout is negative\r\n", "WAIT", "1", "-1")
	mustDo(t, cl, "-ERR timeout is not an integer or out of range\r\n", "WAIT", "1", "x")
	mustDo(t, cl, "-ERR value is not an integer or out of range\r\n", "WAIT", "x", "0")
}

// A write forwarded by a follower carries the leader's index back, so WAIT
// on the follower does not count a member that has not applied it.
func TestWaitAfterForwardedWrite(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	c.published()
	via, behind := c.followers(l)[0], c.followers(l)[1]
	cl := dialMember(t, via)
	mustDo(t, cl, ":1\r\n", "SADD", "s", "a")
	mustDo(t, cl, ":2\r\n", "WAIT", "2", "0")

	c.isolateMember(behind)
	mustDo(t, cl, ":1\r\n", "SADD", "s", "b")
	// The leader has it; the isolated follower, reachable over RESP, not.
	mustDo(t, cl, ":1\r\n", "WAIT", "2", "300")
	c.reconnectMember(behind)
	mustDo(t, cl, ":2\r\n", "WAIT", "2", "0")
}
