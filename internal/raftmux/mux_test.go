package raftmux

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"raftset/internal/certgen"
	"raftset/internal/peerauth"
	"raftset/internal/testutil"
)

func TestHeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		id      uint32
		wantErr bool
		rest    int // bytes left for the group
	}{
		{"legacy append entries", []byte{0, 1, 2}, 0, false, 3},
		{"legacy install snapshot", []byte{2}, 0, false, 1},
		{"group 1", append(appendHeader(nil, 1), 0, 9), 1, false, 2},
		{"group 300", appendHeader(nil, 300), 300, false, 0},
		{"largest group", appendHeader(nil, maxGroupID), maxGroupID, false, 0},
		{"group 0 with a header", []byte{headerByte, 0}, 0, true, 0},
		{"group too large", rawHeader(headerByte, maxGroupID+1), 0, true, 0},
		{"truncated id", []byte{headerByte, 0x80}, 0, true, 0},
		{"empty", nil, 0, true, 0},
	} {
		br := bufio.NewReader(bytes.NewReader(tc.in))
		id, err := readHeader(br)
		if (err != nil) != tc.wantErr || (err == nil && id != tc.id) {
			t.Errorf("%s: readHeader = %d, %v; want %d, error %v", tc.name, id, err, tc.id, tc.wantErr)
			continue
		}
		if rest, _ := io.ReadAll(br); err == nil && len(rest) != tc.rest {
			t.Errorf("%s: %d bytes left for the group, want %d", tc.name, len(rest), tc.rest)
		}
	}
	if _, err := New(nopLayer{}, 0).Group(maxGroupID + 1); err == nil {
		t.Error("Group accepted an id above the largest")
	}
}

func rawHeader(b byte, id uint64) []byte {
	out := []byte{b}
	for id >= 0x80 {
		out = append(out, byte(id)|0x80)
		id >>= 7
	}
	return append(out, byte(id))
}

type nopLayer struct{}

func (nopLayer) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (nopLayer) Close() error              { return nil }
func (nopLayer) Addr() net.Addr            { return &net.TCPAddr{} }
func (nopLayer) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	return nil, net.ErrClosed
}

// logFSM records the commands it applied.
type logFSM struct {
	mu  sync.Mutex
	got []string
}

func (f *logFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, string(l.Data))
	return nil
}
func (f *logFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("not needed") }
func (f *logFSM) Restore(io.ReadCloser) error         { return nil }
func (f *logFSM) applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

const secret = "the cluster secret"

// TestGroupsShareAPort runs two Raft groups over one port per node,
// authenticated by the cluster secret or by mutual TLS: group 0 on nodes a, b and c, where c runs the previous version (a
// plain peerauth stream layer, no mux, as cluster/transport.go does today),
// and group 7 on a and b only. Both elect a leader and commit, each group's
// state machines see only that group's entries, and a stranger that
// skips the secret's handshake reaches no group.
func TestGroupsShareAPort(t *testing.T) {
	ca, err := certgen.NewCA("raftmux test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, auth := range []string{"secret", "mutual TLS"} {
		t.Run(auth, func(t *testing.T) {
			groupsShareAPort(t, func(id string) peerauth.Config {
				if auth == "secret" {
					return peerauth.Config{Secret: []byte(secret)}
				}
				st := testutil.NodeCertStore(t, dir, ca, id)
				srv, err := st.PeerServer(nil)
				if err != nil {
					t.Fatal(err)
				}
				cli, err := st.PeerClient(nil)
				if err != nil {
					t.Fatal(err)
				}
				return peerauth.Config{ServerTLS: srv, ClientTLS: cli}
			})
		})
	}
}

func groupsShareAPort(t *testing.T, authOf func(id string) peerauth.Config) {
	type node struct {
		id     string
		layer  *peerauth.StreamLayer
		mux    *Mux
		addr   raft.ServerAddress
		groups map[uint32]raft.StreamLayer
	}
	mk := func(id string, muxed bool, groups ...uint32) *node {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		layer, err := peerauth.Open(ln, nil, authOf(id))
		if err != nil {
			t.Fatal(err)
		}
		n := &node{id: id, layer: layer, addr: raft.ServerAddress(ln.Addr().String()), groups: map[uint32]raft.StreamLayer{}}
		if !muxed {
			n.groups[0] = layer
			t.Cleanup(func() { layer.Close() })
			return n
		}
		n.mux = New(layer, time.Second)
		t.Cleanup(func() { n.mux.Close() })
		for _, g := range groups {
			gl, err := n.mux.Group(g)
			if err != nil {
				t.Fatal(err)
			}
			n.groups[g] = gl
		}
		return n
	}
	a, b, c := mk("a", true, 0, 7), mk("b", true, 0, 7), mk("c", false)

	start := func(group uint32, members ...*node) ([]*raft.Raft, []*logFSM) {
		var servers []raft.Server
		for _, n := range members {
			servers = append(servers, raft.Server{ID: raft.ServerID(n.id), Address: n.addr})
		}
		var rafts []*raft.Raft
		var fsms []*logFSM
		for _, n := range members {
			cfg := raft.DefaultConfig()
			cfg.LocalID = raft.ServerID(n.id)
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
			cfg.LeaderLeaseTimeout, cfg.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
			cfg.Logger = hclog.NewNullLogger()
			tr := raft.NewNetworkTransportWithLogger(n.groups[group], 2, 2*time.Second, hclog.NewNullLogger())
			store := raft.NewInmemStore()
			f := &logFSM{}
			r, err := raft.NewRaft(cfg, f, store, store, raft.NewInmemSnapshotStore(), tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = r.Shutdown().Error()
				_ = tr.Close()
			})
			rafts = append(rafts, r)
			fsms = append(fsms, f)
		}
		return rafts, fsms
	}
	r0, f0 := start(0, a, b, c)
	r7, f7 := start(7, a, b)

	leader := func(rs []*raft.Raft) *raft.Raft {
		var l *raft.Raft
		testutil.WaitFor(t, 20*time.Second, "a leader", func() bool {
			for _, r := range rs {
				if r.State() == raft.Leader {
					l = r
					return true
				}
			}
			return false
		})
		return l
	}
	for i := range 20 {
		for _, g := range []struct {
			rs  []*raft.Raft
			tag string
		}{{r0, "g0"}, {r7, "g7"}} {
			cmd := fmt.Sprintf("%s-%d", g.tag, i)
			testutil.WaitFor(t, 20*time.Second, "commit "+cmd, func() bool {
				return leader(g.rs).Apply([]byte(cmd), time.Second).Error() == nil
			})
		}
	}
	// An Apply that timed out may still commit, and was retried: an entry
	// may repeat, but every replica of a group applies the same sequence,
	// only that group's entries, and all of them.
	check := func(tag string, fsms []*logFSM) {
		testutil.WaitFor(t, 20*time.Second, tag+"'s replicas to apply everything alike", func() bool {
			first := fsms[0].applied()
			for i, f := range fsms {
				got := f.applied()
				for _, e := range got {
					if !strings.HasPrefix(e, tag+"-") {
						t.Fatalf("%s replica %d applied %v: another group's entries", tag, i, got)
					}
				}
				if !slices.Equal(got, first) {
					return false
				}
			}
			for i := range 20 {
				if !slices.Contains(first, fmt.Sprintf("%s-%d", tag, i)) {
					return false
				}
			}
			return true
		})
	}
	check("g0", f0)
	check("g7", f7)

	// A stranger naming group 7 without authenticating is refused
	// by the authentication layer before the mux sees a byte.
	// Raft's own dials may have reached a before it registered a group
	// (counted as unrouted): count from here.
	before, unrouted := a.layer.Refused(), a.mux.Unrouted()
	conn, err := net.Dial("tcp", string(a.addr))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write(append(appendHeader(nil, 7), 0, 0, 0, 0, 0, 0, 0, 0))
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the stranger's connection was not closed: %v", err)
	}
	conn.Close()
	testutil.WaitFor(t, 10*time.Second, "the stranger to be refused", func() bool { return a.layer.Refused() > before })
	if got := a.mux.Unrouted() - unrouted; got != 0 {
		t.Errorf("the mux saw %d unroutable connections from the stranger, want 0 (they never pass authentication)", got)
	}

	// An authenticated peer naming a group this node does not host is
	// closed and counted.
	gl, err := b.mux.Group(9)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := gl.Dial(a.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = dc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(dc); err != nil {
		t.Fatalf("a connection for a group a does not host was not closed: %v", err)
	}
	dc.Close()
	if got := a.mux.Unrouted() - unrouted; got != 1 {
		t.Errorf("unrouted = %d, want 1", got)
	}
}
