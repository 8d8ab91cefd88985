// Package peerauth is the gate in front of the Raft port: a stream layer for
// hashicorp/raft's network transport that hands Raft a connection only after
// the peer has proven it belongs to the cluster. Raft reads no byte from a
// stranger.
//
// Two ways to prove it:
//   - mutual TLS: both sides present certificates signed by the cluster's CA
//     (optionally with a pinned set of peer names);
//   - a shared secret: a challenge-response handshake in which each side
//     proves knowledge of the secret with an HMAC over fresh nonces from both
//     sides. The secret never crosses the wire and a recorded handshake cannot
//     be replayed, because the other side's nonce is new on every connection.
//     The stream after the handshake is not encrypted: the secret keeps out
//     strangers who can connect, TLS also keeps out those who can watch or
//     alter traffic.
//
// The package knows nothing of raftset's state; it only authenticates bytes.
package peerauth
