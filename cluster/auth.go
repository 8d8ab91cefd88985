package cluster

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
)

// Internal commands (raftset.forward, raftset.readindex, raftset.node,
// raftset.promote, raftset.onleader, raftset.applied) are for nodes only.
// The front end answers them as unknown commands on a connection that has
// not proven the cluster's node secret with RAFTSET.AUTH, a challenge-
// response (internal/peerauth/challenge) in which the secret never crosses
// the wire; every pooled connection a node opens runs it (after AUTH when
// requirepass is set). The node secret is the cluster-secret directive, else
// derived from requirepass, else empty; an empty secret is a key anyone can
// use, which keeps internal commands away from ordinary clients (and tools
// that try every command) but is no protection against someone who reads
// this.

// CmdAuth is the command a node's connections authenticate with.
const CmdAuth = "raftset.auth"

// NodeSecret is the secret nodes prove to each other: clusterSecret
// when set, else one derived from requirepass (so that the password itself
// is not sent twice), else empty. Every node of a cluster must agree on it;
// the front end is given the same value.
func NodeSecret(clusterSecret, requirePass string) string {
	if clusterSecret != "" {
		return clusterSecret
	}
	if requirePass == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("raftset node secret\x00" + requirePass))
	return hex.EncodeToString(sum[:])
}

// peerCreds is how a node connects to another's client address: over TLS
// (presenting its node certificate) when tls is set, then proving the node
// secret (RAFTSET.AUTH's handshake). With a node secret that proof alone
// authenticates the connection as a node, which no ACL rule restricts, so
// that a change of the default user's password (ACL SETUSER default ...,
// which requirepass then no longer follows) or of ACL rules cannot cut
// nodes off from each other: no AUTH is sent. Without a secret there is no
// requirepass either, and the connection runs as the default user.
type peerCreds struct {
	tls    *tls.Config
	secret []byte
}

func (n *Node) peerAuth() peerCreds { return n.cfg.peerAuth() }

// peerAuth is what a node of configuration c proves to the others.
func (c *Config) peerAuth() peerCreds {
	return peerCreds{tls: c.ClientTLS, secret: []byte(NodeSecret(c.ClusterSecret, c.Password))}
}
