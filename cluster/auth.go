package cluster

import (
	"crypto/sha256"
	"encoding/hex"
)

// Internal commands (raftset.forward, raftset.readindex, raftset.node,
// raftset.promote, raftset.onleader, raftset.applied) are for nodes only.
// The front end answers them as unknown commands on a connection that has
// not sent "RAFTSET.AUTH <secret>" with the cluster's node secret; every
// pooled connection a node opens sends it. The node secret is the
// cluster-secret directive, else derived from requirepass, else empty; an
// empty secret accepts any RAFTSET.AUTH, which
// keeps internal commands away from ordinary clients (and tools that try
// every command) but is no protection against someone who reads this.
// RAFTSET.AUTH may come before AUTH; with a non-empty secret it also
// authenticates the connection (resp).

// CmdAuth is the command a node's connections authenticate with.
const CmdAuth = "raftset.auth"

// NodeSecret is the secret nodes present with RAFTSET.AUTH: clusterSecret
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

// peerAuth is what a node sends on each new connection to another node:
// RAFTSET.AUTH alone. With a node secret it authenticates the connection as
// a node, which no ACL rule restricts, so that a change of the default
// user's password (ACL SETUSER default ..., which requirepass then no
// longer follows) or ACL rules cannot cut nodes off from each other.
// Without a secret there is no requirepass either, and the connection runs
// as the default user like any client.
func (n *Node) peerAuth() [][][]byte {
	secret := NodeSecret(n.cfg.ClusterSecret, n.cfg.Password)
	return [][][]byte{{[]byte(CmdAuth), []byte(secret)}}
}
