package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
)

// The transport of the internal protocol: pooled RESP connections to other
// nodes' client addresses, each authenticated once (AUTH when requirepass is
// set, then RAFTSET.AUTH) when it is opened.

const (
	poolIdle    = 16 // idle connections kept per address
	dialTimeout = 2 * time.Second
)

// peerConn is one pooled connection to another node.
type peerConn struct {
	addr string
	*respwire.Client
}

// pool holds idle connections to other nodes, by client address. The
// forwarding pool (leaderOnly) keeps only the current leader's: when the
// leader moves, connections to the old one are closed rather than kept
// for a later return, when they may be dead (a forwarded write that fails
// on a dead connection has an unknown outcome). WAIT's pool keeps every
// member's.
type pool struct {
	leaderOnly bool
	timeout    time.Duration // per call, set before first use
	mu         sync.Mutex
	idle       map[string][]*peerConn
	busy       map[*peerConn]struct{}
	closed     bool
}

var errClosed = errors.New("node closed")

func (p *pool) get(ctx context.Context, addr string, auth [][][]byte) (*peerConn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	if p.leaderOnly {
		for other, list := range p.idle {
			if other != addr {
				for _, pc := range list {
					_ = pc.Close() // the leader moved
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
	pc, err := dialPeer(ctx, addr, p.timeout, auth)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = pc.Close()
		return nil, errClosed
	}
	if p.busy == nil {
		p.busy = map[*peerConn]struct{}{}
	}
	p.busy[pc] = struct{}{}
	p.mu.Unlock()
	return pc, nil
}

// dialPeer opens an authenticated connection to the node at client address
// addr, whose calls time out after timeout.
func dialPeer(ctx context.Context, addr string, timeout time.Duration, auth [][][]byte) (*peerConn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	pc := &peerConn{addr: addr, Client: respwire.NewClient(c, respwire.DialOptions{Timeout: timeout})}
	if err := pc.handshake(ctx, auth); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("authenticate to %s: %w", addr, err)
	}
	return pc, nil
}

// handshake sends the authentication commands (AUTH, RAFTSET.AUTH) on a new
// connection; any error reply fails it.
func (pc *peerConn) handshake(ctx context.Context, auth [][][]byte) error {
	if len(auth) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	for _, args := range auth {
		reply, err := pc.Call(ctx, args)
		if err == nil && command.IsError(reply) {
			err = fmt.Errorf("%s: %s", args[0], strings.TrimSpace(string(reply)))
		}
		if err != nil {
			return err
		}
	}
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
	_ = pc.Close()
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
		_ = pc.Close()
	}
}

// call sends args to the node at client address addr over p and classifies
// what came back: applied or refused (the node answered), notApplied (it
// never saw the call) or outcomeUnknown (sent, no answer), waiting at most
// p's timeout or until ctx ends.
func (n *Node) call(ctx context.Context, p *pool, addr string, args [][]byte) outcome {
	pc, err := p.get(ctx, addr, n.peerAuth())
	if err != nil {
		return outcome{kind: notApplied, err: fmt.Errorf("%s: %w", args[0], err)}
	}
	reply, err := pc.Call(ctx, args)
	p.put(pc, err == nil)
	if err != nil {
		return outcome{kind: outcomeUnknown, err: fmt.Errorf("%s at %s: %w", args[0], addr, err)}
	}
	return answered(reply)
}
