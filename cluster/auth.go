package cluster

import (
	"crypto/sha256"
	"encoding/hex"
)

// Internal commands (raftset.forward, raftset.readindex, raftset.node,
// raftset.promote, raftset.onleader, raftset.applied) are for nodes only.
// The front end answers them as unknown commands on a connection that has
// not sent "RAFTSET.AUTH <secret>" with the cluster's node secret; every
// pooled connection a node opens sends it (after AUTH when requirepass is
// set). The node secret is the cluster-secret directive, else derived from
// requirepass, else empty; an empty secret accepts any RAFTSET.AUTH, which
// keeps internal commands away from ordinary clients (and tools that try
// every command) but is no protection against someone who reads this.

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
// AUTH when requirepass is set, then RAFTSET.AUTH.
func (n *Node) peerAuth() [][][]byte {
	var out [][][]byte
	if n.cfg.Password != "" {
		out = append(out, [][]byte{[]byte("auth"), []byte(n.cfg.Password)})
	}
	secret := NodeSecret(n.cfg.ClusterSecret, n.cfg.Password)
	return append(out, [][]byte{[]byte(CmdAuth), []byte(secret)})
}
