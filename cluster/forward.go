package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"raftset/internal/command"
)

// Forwarding (design brief §1): a follower sends writes, read-index requests
// and membership commands to the leader's client address, over RESP, on a
// small pool of connections, with internal commands:
//
//	raftset.forward <entry> [withindex]
//	                          the ops of one Write, encoded as a
//	                          command.Entry (MULTI/EXEC stays one op);
//	                          the reply is an array of one reply per op,
//	                          then (withindex) the leader's applied index
//	raftset.readindex         the leader confirms its leadership (the
//	                          batched barrier of read.go) and answers the
//	                          index to wait for
//	raftset.node id addr      publish a node's client address
//	raftset.promote id index  a non-voter asks to become a voter, saying
//	                          how far it applied (membership.go)
//	raftset.onleader cmd...   a leader-only command (RAFT.JOIN, RAFT.REMOVE,
//	                          RAFT.TRANSFER, the two above) relayed by a
//	                          follower; never relayed again
//	raftset.applied           this node's applied index (WAIT, wait.go)
//
// They are kept out of COMMAND's output, and a connection may send them
// only after RAFTSET.AUTH with the node secret (auth.go); every connection
// of the pool sends it, after AUTH when requirepass is set.

const (
	cmdForward   = "raftset.forward"
	cmdReadIndex = "raftset.readindex"
	cmdPromote   = "raftset.promote"
	cmdOnLeader  = "raftset.onleader"
	poolIdle     = 16 // idle connections kept to the leader
	dialTimeout  = 2 * time.Second
)

var (
	replyForwardUnreachable = fixed("TRYAGAIN the command was not forwarded: the leader's client address is not known yet or cannot be reached, retry")
	replyForwardUnknown     = fixed("CLUSTERDOWN the write's outcome is unknown: the connection to the leader failed after it was forwarded; it may or may not be applied")
	replyForwardReadFailed  = fixed("TRYAGAIN the read was not served: the leader could not be reached, retry")
	replyReadBehind         = fixed("TRYAGAIN the read was not served: this follower has not caught up with the leader's read index in time, retry")
)

// peerConn is one pooled connection to a leader.
type peerConn struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
}

// pool holds idle connections to other nodes, by client address. The
// forwarding pool (leaderOnly) keeps only the current leader's: when the
// leader moves, connections to the old one are closed rather than kept
// for a later return, when they may be dead (a forwarded write that fails
// on a dead connection has an unknown outcome). WAIT's pool keeps every
// member's.
type pool struct {
	leaderOnly bool
	mu         sync.Mutex
	idle       map[string][]*peerConn
	busy       map[*peerConn]struct{}
	closed     bool
}

func (p *pool) get(ctx context.Context, addr string, auth [][][]byte) (*peerConn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("node closed")
	}
	if p.leaderOnly {
		for other, list := range p.idle {
			if other != addr {
				for _, pc := range list {
					_ = pc.c.Close() // the leader moved
				}
				delete(p.idle, other)
			}
		}
	}
	if list := p.idle[addr]; len(list) > 0 {
		pc := list[len(list)-1]
		p.idle[addr] = list[:len(list)-1]
		p.busy[pc] = struct{}{}
		p.mu.Unlock()
		return pc, nil
	}
	p.mu.Unlock()
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	pc := &peerConn{addr: addr, c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}
	if err := pc.handshake(ctx, auth); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("authenticate to %s: %w", addr, err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.Close()
		return nil, errors.New("node closed")
	}
	if p.busy == nil {
		p.busy = map[*peerConn]struct{}{}
	}
	p.busy[pc] = struct{}{}
	p.mu.Unlock()
	return pc, nil
}

// handshake sends the authentication commands (AUTH, RAFTSET.AUTH) on a new
// connection; any error reply fails it.
func (pc *peerConn) handshake(ctx context.Context, auth [][][]byte) error {
	if len(auth) == 0 {
		return nil
	}
	deadline := time.Now().Add(dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pc.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = pc.c.SetDeadline(time.Now()) })
	defer stop()
	for _, args := range auth {
		reply, err := pc.roundTrip(args)
		if err == nil && command.IsError(reply) {
			err = fmt.Errorf("%s: %s", args[0], strings.TrimSpace(string(reply)))
		}
		if err != nil {
			return err
		}
	}
	_ = pc.c.SetDeadline(time.Time{})
	return nil
}

// put returns a healthy connection to the pool, or closes a broken one.
func (p *pool) put(pc *peerConn, healthy bool) {
	p.mu.Lock()
	delete(p.busy, pc)
	if healthy && !p.closed && len(p.idle[pc.addr]) < poolIdle {
		if p.idle == nil {
			p.idle = map[string][]*peerConn{}
		}
		p.idle[pc.addr] = append(p.idle[pc.addr], pc)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = pc.c.Close()
}

// close closes every connection, idle or in use (unblocking its reader).
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	var conns []*peerConn
	for _, list := range p.idle {
		conns = append(conns, list...)
	}
	p.idle = nil
	for pc := range p.busy {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	for _, pc := range conns {
		_ = pc.c.Close()
	}
}

// roundTrip sends one command and reads one complete reply.
func (pc *peerConn) roundTrip(args [][]byte) ([]byte, error) {
	out := command.AppendArray(nil, len(args))
	for _, a := range args {
		out = command.AppendBulk(out, a)
	}
	if _, err := pc.bw.Write(out); err != nil {
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, err
	}
	return readReply(pc.br, nil)
}

// readReply appends one complete RESP2 reply, as its wire bytes, to dst.
func readReply(br *bufio.Reader, dst []byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errors.New("malformed reply line")
	}
	dst = append(dst, line...)
	switch line[0] {
	case '+', '-', ':':
		return dst, nil
	case '$':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return nil, errors.New("malformed bulk length")
		}
		if n < 0 {
			return dst, nil
		}
		start := len(dst)
		dst = append(dst, make([]byte, n+2)...)
		if _, err := io.ReadFull(br, dst[start:]); err != nil {
			return nil, err
		}
		return dst, nil
	case '*':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return nil, errors.New("malformed array length")
		}
		for range max(n, 0) {
			if dst, err = readReply(br, dst); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	return nil, fmt.Errorf("unexpected reply type %q", line[0])
}

// splitArray splits an array reply into its elements' wire bytes.
func splitArray(reply []byte) ([][]byte, error) {
	br := bufio.NewReader(bytes.NewReader(reply))
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) < 3 || line[0] != '*' {
		return nil, errors.New("not an array reply")
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil || n < 0 {
		return nil, errors.New("malformed array length")
	}
	out := make([][]byte, n)
	for i := range out {
		if out[i], err = readReply(br, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errNotSent says the command certainly did not reach the leader.
var errNotSent = errors.New("not sent")

// relay sends args to the leader and returns its raw reply. An error
// wrapping errNotSent means the leader never saw the command.
func (n *Node) relay(ctx context.Context, args [][]byte) ([]byte, error) {
	lid, addr := n.leaderClient()
	if addr == "" || lid == n.cfg.NodeID {
		return nil, fmt.Errorf("%w: leader client address unknown", errNotSent)
	}
	reply, err := n.ask(ctx, &n.pool, addr, args, n.cfg.ApplyTimeout+n.cfg.BarrierTimeout)
	if err != nil {
		return nil, fmt.Errorf("relay to leader %s: %w", lid, err)
	}
	return reply, nil
}

// ask sends args to the node at client address addr over p and returns
// its raw reply, waiting at most timeout (or until ctx ends). An error
// wrapping errNotSent means the node never saw the command.
func (n *Node) ask(ctx context.Context, p *pool, addr string, args [][]byte, timeout time.Duration) ([]byte, error) {
	pc, err := p.get(ctx, addr, n.peerAuth())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pc.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = pc.c.SetDeadline(time.Now()) })
	reply, err := pc.roundTrip(args)
	stopped := stop()
	_ = pc.c.SetDeadline(time.Time{})
	p.put(pc, err == nil && stopped)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", args[0], addr, err)
	}
	return reply, nil
}

// forwardWriteIndexed sends a follower's Write to the leader and returns
// the replies and the leader's applied index once they were answered (0 when
// the leader did not answer them).
func (n *Node) forwardWriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	out := make([][]byte, len(ops))
	ent := command.Entry{Type: command.TypeBatch, Ops: ops}
	reply, err := n.relay(ctx, [][]byte{[]byte(cmdForward), ent.Encode(nil), forwardWithIndex})
	if err != nil {
		n.log.Debug("forward write failed", "error", err)
		if errors.Is(err, errNotSent) {
			if _, a := n.leaderClient(); a == "" {
				fill(out, notLeaderWrite(n.Leader()))
			} else {
				fill(out, replyForwardUnreachable)
			}
		} else {
			fill(out, replyForwardUnknown)
		}
		return out, 0
	}
	if command.IsError(reply) {
		fill(out, reply) // refused as a whole (e.g. NOAUTH): not proposed
		return out, 0
	}
	parts, err := splitArray(reply)
	if err != nil || len(parts) != len(ops)+1 {
		fill(out, replyUnknownInternal)
		return out, 0
	}
	last := parts[len(ops)]
	index, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimPrefix(last, []byte(":")), []byte("\r\n"))), 10, 64)
	if err != nil {
		index = 0
	}
	n.st.forwarded.Add(uint64(len(ops)))
	return parts[:len(ops)], index
}

// serveForward is raftset.forward on the leader. With "withindex" the
// replies are followed by the leader's applied index once they were
// answered (WAIT on the follower compares members against it).
func (n *Node) serveForward(ctx context.Context, args [][]byte) []byte {
	withIndex := len(args) == 3 && bytes.EqualFold(args[2], forwardWithIndex)
	if len(args) != 2 && !withIndex {
		return command.Error(command.ErrArity(cmdForward))
	}
	e, err := command.Decode(args[1])
	if err != nil {
		return command.Error("ERR " + cmdForward + ": " + err.Error())
	}
	var replies [][]byte
	if len(e.Ops) > 0 {
		replies = n.w.submit(ctx, e.Ops, false)
	}
	size := 32
	for _, r := range replies {
		size += len(r)
	}
	count := len(replies)
	if withIndex {
		count++
	}
	out := command.AppendArray(make([]byte, 0, size), count)
	for _, r := range replies {
		out = append(out, r...)
	}
	if withIndex {
		out = command.AppendInt(out, int64(n.fsm.AppliedIndex()))
	}
	return out
}

// serveReadIndex is raftset.readindex on the leader: steps 1-4 of a
// linearizable read, answering the index the follower waits for.
//
// A target of 0 tells the leader "my state includes everything up to my
// snapshot floor", which says nothing about a follower (after a restart
// each node restored its own snapshot and may still be replaying). Then the
// leader first commits a command entry of its own (republishing its client
// address, which changes nothing), so that the target is an index every
// replica's state machine reaches.
func (n *Node) serveReadIndex(ctx context.Context) []byte {
	target, reply := n.readIndex(ctx)
	if reply == nil && target == 0 && n.rd.floor.Load() > 0 {
		addr := n.cfg.ClientAddr
		if addr == "" {
			addr = n.ClientAddr(n.cfg.NodeID)
		}
		r := n.publishNodeAddr(ctx, n.cfg.NodeID, addr)
		if strings.HasPrefix(string(r), "-TRYAGAIN") || strings.HasPrefix(string(r), "-CLUSTERDOWN") {
			return replyReadLostLeader
		}
		target, reply = n.readIndex(ctx)
	}
	if reply != nil {
		return reply
	}
	return command.AppendInt(nil, int64(target))
}

// followerReadIndex asks the leader for a read index.
func (n *Node) followerReadIndex(ctx context.Context) (uint64, []byte) {
	reply, err := n.relay(ctx, [][]byte{[]byte(cmdReadIndex)})
	if err != nil {
		n.log.Debug("read index failed", "error", err)
		if _, a := n.leaderClient(); a == "" {
			return 0, notLeaderRead(n.Leader())
		}
		return 0, replyForwardReadFailed
	}
	if command.IsError(reply) {
		return 0, reply
	}
	if len(reply) < 4 || reply[0] != ':' {
		return 0, replyForwardReadFailed
	}
	v, err := strconv.ParseUint(string(reply[1:len(reply)-2]), 10, 64)
	if err != nil {
		return 0, replyForwardReadFailed
	}
	return v, nil
}
