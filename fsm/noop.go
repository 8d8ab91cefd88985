package fsm

import "bytes"

// Writes that change nothing need no log entry. SPOP and SREM of a key that
// does not exist answer nil and 0 and leave the state as it was (Redis
// neither propagates nor appends them to its AOF); a queue's consumers
// polling an empty set send little else. The leader answers them as reads
// (cluster/noop.go) once a read barrier shows the key absent.

var (
	replyNilBulk = []byte("$-1\r\n")
	replyZero    = []byte(":0\r\n")
)

// NoopReply returns the reply of args, a write command, and true when
// applying it to the present state would change nothing and its reply
// depends on nothing but the key's absence: SPOP key (without a count,
// whose validation comes first) and SREM key member... when key does not
// exist or its deadline has passed at max(nowMs, the state's clock), and
// its slot is simply owned (a migrating slot's refusals belong to Apply).
// For any other command, or when the key exists, it returns false.
func (f *FSM) NoopReply(args [][]byte, nowMs int64) ([]byte, bool) {
	var reply []byte
	switch {
	case len(args) == 2 && bytes.EqualFold(args[0], []byte("spop")):
		reply = replyNilBulk
	case len(args) >= 3 && bytes.EqualFold(args[0], []byte("srem")):
		reply = replyZero
	default:
		return nil, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	key := args[1]
	if ks.slotHeld(key) {
		return nil, false
	}
	if pos := ks.find(key); pos >= 0 && !ks.expiredAt(pos, max(nowMs, ks.now)) {
		return nil, false
	}
	return reply, true
}
