package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"raftset/internal/command"
	"raftset/internal/peerauth/challenge"
	"raftset/internal/respwire"
)

// The transport of the internal protocol: pooled RESP connections to other
// nodes' client addresses, over TLS when Config.ClientTLS is set, each
// authenticated once (AUTH when requirepass is set, then RAFTSET.AUTH's
// challenge-response) when it is opened.

const (
	// poolIdle is the idle connections kept per address. It covers the
	// calls in flight at once (about one per client connection a follower
	// forwards for): past it, a returned connection is closed and the next
	// call dials again, which with tls-cluster costs a TLS handshake (at 16,
	// a follower's SADD -c 50 -P 10 opened thousands of connections and ran at
	// half the plain rate).
	poolIdle    = 64
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

func (p *pool) get(ctx context.Context, addr string, auth peerCreds) (*peerConn, error) {
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
func dialPeer(ctx context.Context, addr string, timeout time.Duration, auth peerCreds) (*peerConn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if auth.tls != nil {
		tc := tls.Client(c, auth.tls)
		hctx, cancel := context.WithTimeout(ctx, dialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("dial %s: tls: %w", addr, err)
		}
		c = tc
	}
	pc := &peerConn{addr: addr, Client: respwire.NewClient(c, respwire.DialOptions{Timeout: timeout})}
	if err := pc.handshake(ctx, auth); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("authenticate to %s: %w", addr, err)
	}
	return pc, nil
}

// handshake authenticates a new connection with RAFTSET.AUTH's
// challenge-response, in which the other node proves the secret first (no
// AUTH: see peerCreds); any error reply fails it.
func (pc *peerConn) handshake(ctx context.Context, auth peerCreds) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	call := func(args ...[]byte) ([]byte, error) {
		reply, err := pc.Call(ctx, args)
		if err == nil && command.IsError(reply) {
			err = fmt.Errorf("%s: %s", args[0], strings.TrimSpace(string(reply)))
		}
		return reply, err
	}
	nc, err := challenge.Nonce()
	if err != nil {
		return err
	}
	reply, err := call([]byte(CmdAuth), []byte("hello"), nc)
	if err != nil && len(auth.secret) == 0 && command.IsError(reply) {
		// A node of the previous release knows only "RAFTSET.AUTH <secret>"
		// and, without a secret, accepts any: during a rolling upgrade of a
		// cluster without one, that form lets this node forward to it.
		// Sending an empty secret in clear gives nothing away; with a secret
		// there is no fallback (docs/operations.md, Upgrade).
		_, err = call([]byte(CmdAuth), nil)
		return err
	}
	if err != nil {
		return err
	}
	answer, err := respwire.Parse(reply)
	if err != nil || answer.Kind != '*' || len(answer.Elems) != 2 {
		return fmt.Errorf("%s: unexpected answer %q", CmdAuth, reply)
	}
	proof, err := challenge.Prove(auth.secret, challenge.PurposeInternal, nc,
		[]byte(answer.Elems[0].Str), []byte(answer.Elems[1].Str))
	if err != nil {
		return err
	}
	_, err = call([]byte(CmdAuth), []byte("proof"), proof)
	return err
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
	return n.callShard(ctx, p, addr, n.cfg.Shard, args)
}

// callShard is call for the receiver's replica of shard (wrapped in
// raftset.shard unless it is 0).
func (n *Node) callShard(ctx context.Context, p *pool, addr string, shard uint32, args [][]byte) outcome {
	return callShard(ctx, p, n.peerAuth(), addr, shard, args)
}

// callShard is Node.callShard with the credentials given: a Host calls
// with its own, which need no replica (Host.call).
func callShard(ctx context.Context, p *pool, creds peerCreds, addr string, shard uint32, args [][]byte) outcome {
	pc, err := p.get(ctx, addr, creds)
	if err != nil {
		return outcome{kind: notApplied, err: fmt.Errorf("%s: %w", args[0], err)}
	}
	sent := args
	if shard != 0 {
		sent = append([][]byte{[]byte(cmdShard), []byte(strconv.FormatUint(uint64(shard), 10))}, args...)
	}
	reply, err := pc.Call(ctx, sent)
	p.put(pc, err == nil)
	if err != nil {
		return outcome{kind: outcomeUnknown, err: fmt.Errorf("%s at %s: %w", args[0], addr, err)}
	}
	return answered(reply)
}
