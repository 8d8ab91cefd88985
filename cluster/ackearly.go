package cluster

import (
	"bytes"
	"strconv"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
)

// Config.AckBeforeCommit (test-only, UNSAFE). The leader answers an entry's
// writers as soon as raft.Apply has taken the entry, with a reply guessed
// from the command instead of the state machine's: a write acknowledged
// this way is lost if the leader dies before a quorum stored it. It exists
// so the Jepsen suite can show that its set checker reports lost
// acknowledged writes (integration/jepsen_workloads_test.go).

// earlyAck holds the guessed replies of one entry; nil when the switch is
// off.
type earlyAck [][]byte

// ackEarly guesses the replies of ops, or returns nil when the switch is
// off. It runs before the proposer drops its references to the ops.
func (n *Node) ackEarly(ops []command.Op) earlyAck {
	if !n.cfg.AckBeforeCommit {
		return nil
	}
	out := make(earlyAck, len(ops))
	for i := range ops {
		out[i] = guessReply(&ops[i])
	}
	return out
}

// guessReply is the reply a successful op usually gets: the member count
// for SADD and SREM (right for the suite's unique members), +OK otherwise.
func guessReply(op *command.Op) []byte {
	switch {
	case op.Kind == command.OpReply:
		return op.Reply
	case op.Kind == command.OpCommand && len(op.Args) > 2 &&
		(bytes.EqualFold(op.Args[0], []byte("sadd")) || bytes.EqualFold(op.Args[0], []byte("srem"))):
		return []byte(":" + strconv.Itoa(len(op.Args)-2) + "\r\n")
	default:
		return command.OK
	}
}

// wrap returns fut itself when the switch is off, else a future that
// reports success at once with the guessed replies.
func (a earlyAck) wrap(fut raft.ApplyFuture) raft.ApplyFuture {
	if a == nil {
		return fut
	}
	return earlyFuture{ApplyFuture: fut, res: &fsm.ApplyResult{Replies: a}}
}

type earlyFuture struct {
	raft.ApplyFuture
	res *fsm.ApplyResult
}

func (f earlyFuture) Error() error  { return nil }
func (f earlyFuture) Response() any { return f.res }
