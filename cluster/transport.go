package cluster

import (
	"errors"
	"fmt"
	"net"

	"github.com/hashicorp/raft"

	"raftset/internal/peerauth"
)

// The Raft port is the cluster's most powerful door: whoever speaks Raft to
// a node can make it follow a forged leader and apply anything. So Raft never
// reads a byte from a connection whose peer has not proven the cluster's
// credentials (internal/peerauth): a certificate signed by the cluster CA
// with PeerTLS, else knowledge of the node secret. With neither there is
// nothing to prove, and the port is served only on loopback unless
// protected mode is off.

// errUnprotected is openNetworkTransport's refusal to expose an
// unauthenticated Raft port.
var errUnprotected = errors.New("refusing to serve Raft on a non-loopback address without peer authentication: " +
	"set cluster-secret (or requirepass), or tls-cluster yes with certificates, or protected-mode no to accept any peer that can reach the port")

func (n *Node) openNetworkTransport() (raft.Transport, error) {
	cfg := &n.cfg
	var adv net.Addr // nil: the listener's address
	if cfg.RaftAdvertise != "" {
		var err error
		if adv, err = net.ResolveTCPAddr("tcp", cfg.RaftAdvertise); err != nil {
			return nil, fmt.Errorf("cluster: resolve RaftAdvertise %q: %w", cfg.RaftAdvertise, err)
		}
	}
	secret := NodeSecret(cfg.ClusterSecret, cfg.Password)
	if cfg.PeerTLS == nil && secret == "" {
		if !isLoopbackBind(cfg.RaftBind) {
			if cfg.ProtectedMode {
				return nil, fmt.Errorf("cluster: %s: %w", cfg.RaftBind, errUnprotected)
			}
			cfg.Logger.Warn("the Raft port accepts any peer: no cluster-secret, requirepass or tls-cluster, and protected-mode is off", "raft_bind", cfg.RaftBind)
		}
		// A failed NewTCPTransport returns a nil *NetworkTransport; returned
		// as a raft.Transport, that would be a non-nil interface the cleanup
		// would Close.
		tcp, err := raft.NewTCPTransportWithLogger(cfg.RaftBind, adv, tcpMaxPool, tcpTimeout, cfg.Logger.Named("raft-net"))
		if err != nil {
			return nil, fmt.Errorf("cluster: listen on %s: %w", cfg.RaftBind, err)
		}
		return tcp, nil
	}
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
	pc := peerauth.Config{Secret: []byte(secret), Logger: cfg.Logger.Named("raft-auth")}
	if cfg.PeerTLS != nil {
		pc.ServerTLS, pc.ClientTLS = cfg.PeerTLS.Server, cfg.PeerTLS.Client
	}
	stream, err := peerauth.Open(ln, adv, pc)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("cluster: raft port: %w", err)
	}
	n.peerGate = stream
	return raft.NewNetworkTransportWithLogger(stream, tcpMaxPool, tcpTimeout, cfg.Logger.Named("raft-net")), nil
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
	if n.peerGate == nil {
		return 0
	}
	return n.peerGate.Refused()
}
