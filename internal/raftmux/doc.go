// Package raftmux lets several hashicorp/raft groups share one Raft port
// (docs/sharding.md, "Groups"): it splits the connections of one
// raft.StreamLayer — normally peerauth's, so every group's bytes pass the
// same peer authentication or mutual TLS first — among one StreamLayer per
// group, by a group id the dialing side writes after authenticating.
//
// Group 0 is today's single group and needs no header: its connections
// start directly with Raft's own bytes, exactly as a node of the previous
// version sends and expects them, so old and new nodes keep talking during
// a rolling upgrade. Every other group's connection starts with the header
// byte 0xA7 (never the first byte of a hashicorp/raft RPC, whose type
// bytes are 0 to 3) and the group id as a uvarint.
//
// The package knows nothing of raftset's state; it only routes bytes.
package raftmux
