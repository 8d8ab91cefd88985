package cluster

import (
	"context"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// noopAnswerer is a state machine that knows which writes would change
// nothing (*fsm.FSM: SPOP and SREM of an absent key).
type noopAnswerer interface {
	NoopReply(args [][]byte, nowMs int64) ([]byte, bool)
}

// answerNoops answers the leading ops of a connection's run of writes that
// would change nothing, without a log entry, and returns their replies
// (nil: none). A leader checks its state first; only when that shows a
// no-op does it pay a read barrier, after which each op is checked again:
// the answer is then a linearizable read of the key's absence. Only a
// prefix qualifies, so that the connection's order holds: every op after
// it is proposed after these were decided, and none before it wrote.
func (n *Node) answerNoops(ctx context.Context, ops []command.Op) [][]byte {
	na, ok := n.fsm.(noopAnswerer)
	if !ok || len(ops) == 0 || ops[0].Kind != command.OpCommand || n.raft.State() != raft.Leader {
		return nil
	}
	if _, ok := na.NoopReply(ops[0].Args, n.nowMs()); !ok {
		return nil
	}
	if n.linearize(ctx) != nil {
		return nil // no barrier: propose them, as any write
	}
	now := n.nowMs()
	var out [][]byte
	for _, op := range ops {
		if op.Kind != command.OpCommand {
			break
		}
		r, ok := na.NoopReply(op.Args, now)
		if !ok {
			break
		}
		out = append(out, r)
	}
	return out
}
