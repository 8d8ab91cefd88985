package resp

import (
	"bytes"

	"raftset/internal/command"
	"raftset/internal/peerauth/challenge"
)

// RAFTSET.AUTH proves, without sending it, that a connection knows the node
// secret (internal/peerauth/challenge, the Raft port's proof in RESP):
//
//	RAFTSET.AUTH HELLO <client nonce>  → *2 <server nonce> <server proof>
//	RAFTSET.AUTH PROOF <client proof>  → +OK, or -WRONGPASS
//
// The server proves itself first, so a node never answers an impostor's
// challenge with a proof; the nonce is new on every connection, so a
// recorded exchange is no good on another. An empty node secret is a key
// like any other: it only hides internal commands from ordinary clients.
func (c *client) cmdNodeAuth(dst []byte, args [][]byte) []byte {
	secret := []byte(c.s.cfg.NodeSecret)
	if len(args) == 2 && len(secret) == 0 && len(args[1]) == 0 {
		// The previous release's "RAFTSET.AUTH <secret>", from a node of it
		// during a rolling upgrade of a cluster without a secret, where it
		// proves nothing anyway. With a secret only the handshake counts.
		c.node = true
		return append(dst, command.OK...)
	}
	if len(args) != 3 {
		return command.AppendError(dst, command.ErrArity("raftset.auth"))
	}
	switch {
	case bytes.EqualFold(args[1], []byte("hello")):
		ns, serverMAC, want, err := challenge.Answer(secret, challenge.PurposeInternal, args[2])
		if err != nil {
			c.nodeProof = nil
			return command.AppendError(dst, "ERR invalid node handshake")
		}
		c.nodeProof = want
		dst = command.AppendArray(dst, 2)
		dst = command.AppendBulk(dst, ns)
		return command.AppendBulk(dst, serverMAC)
	case bytes.EqualFold(args[1], []byte("proof")):
		want := c.nodeProof
		c.nodeProof = nil // one proof per challenge
		if want == nil {
			return command.AppendError(dst, "ERR RAFTSET.AUTH PROOF without HELLO")
		}
		if !challenge.Verify(args[2], want) {
			c.s.log.Warn("a connection failed the node handshake (RAFTSET.AUTH); check cluster-secret / requirepass on every node", "addr", c.addr)
			return command.AppendError(dst, "WRONGPASS invalid node secret")
		}
		c.node = true
		if c.s.cfg.NodeSecret != "" {
			c.authed = true // a proven node needs no user (aclExempt)
		}
		return append(dst, command.OK...)
	}
	return command.AppendError(dst, command.ErrSyntax)
}
