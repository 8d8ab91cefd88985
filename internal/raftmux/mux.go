package raftmux

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/connq"
)

// headerByte opens a connection for a group other than 0. hashicorp/raft's
// NetworkTransport starts every connection with an RPC type byte (0-3), so
// a connection that starts otherwise is from an older node: group 0.
const headerByte = 0xA7

// maxGroupID bounds group ids (a uvarint of at most 4 bytes): thousands of
// shards fit, and a peer cannot make the header arbitrarily long.
const maxGroupID = 1<<28 - 1

// Mux splits one authenticated stream layer among Raft groups.
type Mux struct {
	base raft.StreamLayer
	// HeaderTimeout bounds the wait for an accepted connection's first
	// bytes. A group's Raft transport writes as soon as it dials.
	headerTimeout time.Duration

	mu     sync.Mutex
	groups map[uint32]*Group
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup

	unrouted atomic.Uint64
}

// New starts routing base's connections. Groups must be added before peers
// dial them; a connection for a group not (or no longer) here is closed.
func New(base raft.StreamLayer, headerTimeout time.Duration) *Mux {
	if headerTimeout <= 0 {
		headerTimeout = 5 * time.Second
	}
	m := &Mux{base: base, headerTimeout: headerTimeout, groups: map[uint32]*Group{}, done: make(chan struct{})}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

// Addr is the shared port's advertised address.
func (m *Mux) Addr() net.Addr { return m.base.Addr() }

// Unrouted counts connections closed because their header was malformed or
// named a group this node does not host.
func (m *Mux) Unrouted() uint64 { return m.unrouted.Load() }

// Group returns the stream layer of group id, creating it: hand it to
// raft.NewNetworkTransport. Closing it removes the group.
func (m *Mux) Group(id uint32) (*Group, error) {
	if id > maxGroupID {
		return nil, fmt.Errorf("raftmux: group id %d above %d", id, maxGroupID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, net.ErrClosed
	}
	if _, ok := m.groups[id]; ok {
		return nil, fmt.Errorf("raftmux: group %d already open", id)
	}
	g := &Group{m: m, id: id, queue: connq.New()}
	m.groups[id] = g
	return g, nil
}

func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.base.Accept()
		if err != nil {
			if !connq.RetryAccept(err, m.done) {
				return
			}
			continue
		}
		// Each connection's header is read on its own goroutine: a peer
		// that sends nothing must not hold up the others.
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(c)
		}()
	}
}

// route reads c's header and hands c to its group.
func (m *Mux) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(m.headerTimeout))
	br := bufio.NewReaderSize(c, 16)
	id, err := readHeader(br)
	if err != nil {
		m.unrouted.Add(1)
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	m.mu.Lock()
	g := m.groups[id]
	m.mu.Unlock()
	if g == nil {
		m.unrouted.Add(1)
		_ = c.Close()
		return
	}
	var rc net.Conn = c
	if br.Buffered() > 0 {
		// Bytes read past the header (group 0's first RPC byte, or a
		// pipelined RPC) are the group's.
		rc = &bufferedConn{Conn: c, r: br}
	}
	g.queue.Deliver(rc, m.done)
}

// readHeader returns the group a connection is for, consuming the header
// (and nothing else) from br; a connection without one is group 0's.
func readHeader(br *bufio.Reader) (uint32, error) {
	b, err := br.Peek(1)
	if err != nil {
		return 0, fmt.Errorf("raftmux: read header: %w", err)
	}
	if b[0] != headerByte {
		return 0, nil
	}
	_, _ = br.ReadByte()
	id, err := binary.ReadUvarint(br)
	if err != nil {
		return 0, fmt.Errorf("raftmux: read group id: %w", err)
	}
	if id == 0 || id > maxGroupID {
		// Group 0 never sends a header: a header that names it is not
		// from this protocol.
		return 0, fmt.Errorf("raftmux: bad group id %d", id)
	}
	return uint32(id), nil
}

// appendHeader appends the header a connection for group id starts with
// (nothing for group 0).
func appendHeader(dst []byte, id uint32) []byte {
	if id == 0 {
		return dst
	}
	dst = append(dst, headerByte)
	return binary.AppendUvarint(dst, uint64(id))
}

// Close closes the base layer and every group.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	groups := m.groups
	m.groups = map[uint32]*Group{}
	m.mu.Unlock()
	err := m.base.Close()
	for _, g := range groups {
		g.queue.Close()
	}
	m.wg.Wait()
	return err
}

// Group is one Raft group's share of the port: a raft.StreamLayer.
type Group struct {
	m     *Mux
	id    uint32
	queue *connq.Queue // connections routed to the group, for Accept
}

var _ raft.StreamLayer = (*Group)(nil)

// Accept returns the next connection for this group.
func (g *Group) Accept() (net.Conn, error) { return g.queue.Accept() }

// Dial connects to a peer through the base layer (authenticating) and
// names this group.
func (g *Group) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := g.m.base.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	if g.id == 0 {
		return c, nil
	}
	if timeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(appendHeader(nil, g.id)); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raftmux: send group %d header to %s: %w", g.id, address, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// Close removes the group: its Accept returns, and connections for it are
// refused from now on. The base layer stays open for the other groups.
func (g *Group) Close() error {
	g.m.mu.Lock()
	if g.m.groups[g.id] == g {
		delete(g.m.groups, g.id)
	}
	g.m.mu.Unlock()
	g.queue.Close()
	return nil
}

// Addr is the shared port's advertised address: every group is reached at
// the same one.
func (g *Group) Addr() net.Addr { return g.m.base.Addr() }

// bufferedConn returns the bytes already read into r before reading c.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
