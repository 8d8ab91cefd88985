package testutil

import (
	"time"

	"raftset/internal/respwire"
)

// RESPClient is respwire's client: it sends a command and returns the reply
// exactly as it came off the wire, so tests can compare replies byte for
// byte. It never retries.
type RESPClient = respwire.Client

// Reply is a parsed reply (respwire.Reply).
type Reply = respwire.Reply

// DialRESP connects to addr, with timeout for the dial and for each command.
func DialRESP(addr string, timeout time.Duration) (*RESPClient, error) {
	return respwire.Dial(addr, timeout)
}

// ParseReply parses one raw reply as RESPClient returns it; a malformed
// reply parses as Kind '?' (a test compares it and fails).
func ParseReply(raw string) Reply {
	return respwire.MustParse([]byte(raw))
}
