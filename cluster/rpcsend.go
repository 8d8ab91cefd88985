package cluster

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// The sending side of the internal protocol: each sender makes its call,
// switches on the outcome, and (when a client waits) turns it into the
// client's reply.

// relay sends args to the leader over the forwarding pool. Without a known
// leader client address, or when that address is this node's own, the call
// is not sent.
func (n *Node) relay(ctx context.Context, args [][]byte) outcome {
	lid, addr := n.leaderClient()
	if addr == "" || lid == n.cfg.NodeID {
		return outcome{kind: notApplied, err: errors.New("leader client address unknown")}
	}
	return n.call(ctx, &n.pool, addr, args)
}

// hintLeader turns a failed call into notLeader when this node no longer
// knows the leader's client address, so that the client hears who leads
// (or that nobody does) rather than that the leader was unreachable.
func (n *Node) hintLeader(o outcome) outcome {
	if _, a := n.leaderClient(); a == "" {
		addr, id := n.Leader()
		return outcome{kind: notLeader, hint: leaderHint{addr: addr, id: id}, err: o.err}
	}
	return o
}

// forwardWriteIndexed sends a follower's Write to the leader and returns
// the replies and the leader's applied index once they were answered (0 when
// the leader did not answer them).
func (n *Node) forwardWriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	o := n.relay(ctx, forwardReq{ops: ops, withIndex: true}.args())
	if o.kind == notApplied {
		o = n.hintLeader(o)
	}
	o, replies, index := decodeForward(o, len(ops))
	if o.kind != applied {
		if o.err != nil {
			n.log.Debug("forward write failed", "outcome", o.kind, "error", o.err)
		}
		out := make([][]byte, len(ops))
		fill(out, o.writeReply())
		return out, 0
	}
	n.st.forwarded.Add(uint64(len(ops)))
	return replies, index
}

// followerReadIndex asks the leader for a read index; a nil reply means
// the index is valid.
func (n *Node) followerReadIndex(ctx context.Context) (uint64, []byte) {
	o := n.relay(ctx, readIndexArgs)
	if o.kind == notApplied || o.kind == outcomeUnknown {
		o = n.hintLeader(o) // a read is safe to retry whatever happened
	}
	o, index := decodeIndex(o, cmdReadIndex)
	if o.kind != applied {
		if o.err != nil {
			n.log.Debug("read index failed", "outcome", o.kind, "error", o.err)
		}
		return 0, o.readReply()
	}
	return index, nil
}

// askLeader runs a leader-only command here when this node leads, or
// relays it to the leader with raftset.onleader.
func (n *Node) askLeader(ctx context.Context, cmd [][]byte) outcome {
	if n.raft.State() == raft.Leader {
		return answered(n.leaderCommand(ctx, cmd))
	}
	return n.relay(ctx, onLeaderReq{cmd: cmd}.args())
}

// onLeader is askLeader for a client's command (RAFT.JOIN, RAFT.REMOVE,
// RAFT.TRANSFER): its reply.
func (n *Node) onLeader(ctx context.Context, cmd [][]byte) []byte {
	return n.askLeader(ctx, cmd).leaderCommandReply(cmd[0])
}

// askApplied asks one node for its applied index (WAIT).
func (n *Node) askApplied(ctx context.Context, addr string) (uint64, error) {
	o, index := decodeIndex(n.call(ctx, &n.queries, addr, appliedArgs), cmdApplied)
	switch o.kind {
	case applied:
		return index, nil
	case refused:
		return 0, errors.New(cmdApplied + ": " + string(o.reply))
	}
	return 0, o.err
}

// handClockOver sends this leader's cluster time to the voters among
// members (those a transfer may hand leadership to; this node is skipped),
// before the transfer starts (clock.go, handOver), and waits for their
// answers. Best effort: a target that did not hear it (unreachable, or of
// an earlier release, which answers an unknown command) takes over from
// the entries it applied, as before.
func (n *Node) handClockOver(ctx context.Context, members []raft.Server) {
	if !n.leading() {
		return // the transfer fails too
	}
	args := clockReq{t: n.clock.read(true)}.args()
	var wg sync.WaitGroup
	for _, s := range members {
		addr := n.fsm.ClientAddr(string(s.ID))
		if s.Suffrage != raft.Voter || string(s.ID) == n.cfg.NodeID || addr == "" {
			continue
		}
		wg.Go(func() {
			if o := n.call(ctx, &n.queries, addr, args); o.kind != applied || !bytes.Equal(o.reply, command.OK) {
				n.log.Debug("handing the cluster time over failed", "to", s.ID, "outcome", o.kind, "reply", string(o.reply), "error", o.err)
			}
		})
	}
	wg.Wait()
}
