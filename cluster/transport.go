package cluster

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/peerauth"
	"raftset/internal/raftmux"
)

// The Raft port is the cluster's most powerful door: whoever speaks Raft to
// a node can make it follow a forged leader and apply anything. So Raft never
// reads a byte from a connection whose peer has not proven the cluster's
// credentials (internal/peerauth): a certificate signed by the cluster CA
// with PeerTLS, else knowledge of the node secret. With neither there is
// nothing to prove, and the port is served only on loopback unless
// protected mode is off.
//
// The port is shared by every Raft group of the process (internal/raftmux,
// docs/sharding.md "Groups"): each shard's transport is the mux's group of
// the shard's id. Group 0 sends no header, so a single-group node talks to
// nodes of the previous release unchanged.

// errUnprotected is OpenRaftPort's refusal to expose an unauthenticated
// Raft port.
var errUnprotected = errors.New("refusing to serve Raft on a non-loopback address without peer authentication: " +
	"set cluster-secret (or requirepass), or tls-cluster yes with certificates, or protected-mode no to accept any peer that can reach the port")

// RaftPort is the process's Raft listener, split among its Raft groups.
type RaftPort struct {
	mux  *raftmux.Mux
	gate *peerauth.StreamLayer // nil when the port does not authenticate
}

// OpenRaftPort listens on cfg.RaftBind, authenticating peers as cfg says
// (the fields of Config that describe the port: RaftBind, RaftAdvertise,
// ClusterSecret, Password, PeerTLS, ProtectedMode, Logger).
func OpenRaftPort(cfg Config) (*RaftPort, error) {
	if cfg.Logger == nil {
		cfg.fillDefaults()
	}
	var adv net.Addr // nil: the listener's address
	if cfg.RaftAdvertise != "" {
		var err error
		if adv, err = net.ResolveTCPAddr("tcp", cfg.RaftAdvertise); err != nil {
			return nil, fmt.Errorf("cluster: resolve RaftAdvertise %q: %w", cfg.RaftAdvertise, err)
		}
	}
	secret := NodeSecret(cfg.ClusterSecret, cfg.Password)
	ln, err := net.Listen("tcp", cfg.RaftBind)
	if err != nil {
		return nil, fmt.Errorf("cluster: listen on %s: %w", cfg.RaftBind, err)
	}
	if adv == nil {
		if err := checkAdvertise(ln.Addr().String()); err != nil {
			_ = ln.Close()
			return nil, err
		}
	}
	if cfg.PeerTLS == nil && secret == "" {
		if !isLoopbackBind(cfg.RaftBind) {
			if cfg.ProtectedMode {
				_ = ln.Close()
				return nil, fmt.Errorf("cluster: %s: %w", cfg.RaftBind, errUnprotected)
			}
			cfg.Logger.Warn("the Raft port accepts any peer: no cluster-secret, requirepass or tls-cluster, and protected-mode is off", "raft_bind", cfg.RaftBind)
		}
		return &RaftPort{mux: raftmux.New(&plainStream{Listener: ln, adv: adv}, 0)}, nil
	}
	pc := peerauth.Config{Secret: []byte(secret), Logger: cfg.Logger.Named("raft-auth")}
	if cfg.PeerTLS != nil {
		pc.ServerTLS, pc.ClientTLS = cfg.PeerTLS.Server, cfg.PeerTLS.Client
	}
	stream, err := peerauth.Open(ln, adv, pc)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("cluster: raft port: %w", err)
	}
	return &RaftPort{mux: raftmux.New(stream, 0), gate: stream}, nil
}

// Close closes the listener and every group's share of it.
func (p *RaftPort) Close() error { return p.mux.Close() }

// Addr is the address peers dial (the advertised one when set).
func (p *RaftPort) Addr() string { return p.mux.Addr().String() }

// Refused counts connections refused because the peer did not authenticate
// (0 when the port does not authenticate).
func (p *RaftPort) Refused() uint64 {
	if p.gate == nil {
		return 0
	}
	return p.gate.Refused()
}

// transport is group id's Raft transport on the port, without pipelined
// replication (MaxRPCsInFlight 1: one AppendEntries in flight per
// follower, as when the transport does not offer a pipeline). Raft's
// pipeline can deadlock: with the default 2 in flight its channels have
// no buffer, and after a follower answers an append with Success=false
// the sender can park on a send nobody reads while the pipeline is only
// closed by that same goroutine. The follower then keeps getting
// heartbeats, so it never calls an election, but no log entry until the
// leader changes (hashicorp/raft#612; grafana/pyroscope#5518 turned
// pipelining off for it). It hung the close of hosts in this package's
// tests. On a LAN the pipeline buys little (hashicorp/raft#541):
// docs/benchmarks.md measures the difference.
func (p *RaftPort) transport(id uint32, cfg *Config) (*raft.NetworkTransport, error) {
	g, err := p.mux.Group(id)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft group %d: %w", id, err)
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: g, MaxPool: tcpMaxPool, Timeout: tcpTimeout, Logger: cfg.Logger.Named("raft-net"),
		MaxRPCsInFlight: noPipelining,
	}), nil
}

// noPipelining is the MaxRPCsInFlight that turns Raft's pipelined
// replication off (below raft's minimum for pipelining, 2).
const noPipelining = 1

// openNetworkTransport gives the node its group's transport on
// Config.RaftPort, or on a port of its own, which the node then closes.
func (n *Node) openNetworkTransport() (raft.Transport, error) {
	port := n.cfg.RaftPort
	if port == nil {
		var err error
		if port, err = OpenRaftPort(n.cfg); err != nil {
			return nil, err
		}
		n.ownPort = port
	}
	n.port = port
	trans, err := port.transport(n.cfg.Shard, &n.cfg)
	if err != nil {
		if n.ownPort != nil {
			_ = n.ownPort.Close()
		}
		return nil, err
	}
	n.acks = newFreshAcks()
	gt := guardedTransport{NetworkTransport: trans, guard: &n.heartbeats, acks: n.acks}
	if w, ok := n.walLog.(walStore); ok {
		// This transport holds the replies that a deferred fsync needs
		// held (leadersync.go): the leader may defer.
		gt.lead = w.lead
		n.stores.lead = w.lead
		w.lead.enable(n.mayDeferSync, n.stores.stored)
	}
	return gt, nil
}

// plainStream is the unauthenticated Raft port (loopback, or protected
// mode off): raw TCP, as raft's own TCP transport, but a StreamLayer the
// mux can split.
type plainStream struct {
	net.Listener
	adv net.Addr
}

func (s *plainStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, fmt.Errorf("dial raft peer %s: %w", address, err)
	}
	return c, nil
}

func (s *plainStream) Addr() net.Addr {
	if s.adv != nil {
		return s.adv
	}
	return s.Listener.Addr()
}

// isLoopbackBind reports whether a listen address admits loopback peers only.
func isLoopbackBind(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RaftRefused counts connections to the Raft port refused because the peer
// did not authenticate (0 when the port does not authenticate).
func (n *Node) RaftRefused() uint64 {
	if n.port == nil {
		return 0
	}
	return n.port.Refused()
}
