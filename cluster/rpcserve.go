package cluster

import (
	"context"
	"strings"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// The receiving side of the internal protocol.

// Internal runs an internal command another node sent (args[0] is its
// name); the front end calls it only for connections that passed
// RAFTSET.AUTH. Arity is already checked by the front end.
func (n *Node) Internal(ctx context.Context, args [][]byte) []byte {
	if len(args) == 0 {
		return replyNoAdminCommand
	}
	switch strings.ToLower(string(args[0])) {
	case cmdForward:
		req, bad := parseForward(args)
		if bad != nil {
			return bad
		}
		return n.serveForward(ctx, req)
	case cmdReadIndex:
		return n.serveReadIndex(ctx)
	case cmdApplied:
		return n.serveApplied()
	case cmdClock:
		req, bad := parseClock(args)
		if bad != nil {
			return bad
		}
		n.clock.handOver(req.t)
		return command.OK
	case cmdFormats:
		return n.serveFormats()
	case CmdNode, cmdPromote:
		// Sent straight to a node rather than wrapped in raftset.onleader:
		// relayed when this node does not lead.
		return n.onLeader(ctx, args)
	case cmdOnLeader:
		return n.serveOnLeader(ctx, args)
	case cmdLeader:
		return n.serveLeader()
	case cmdSlotStep:
		return n.onLeader(ctx, args)
	case cmdTransfer:
		if len(args) != 2 {
			return command.Error(command.ErrArity(cmdTransfer))
		}
		return n.onLeader(ctx, [][]byte{[]byte("raft.transfer"), args[1]})
	case cmdExportSlot:
		return n.serveExportSlot(ctx, args)
	case cmdAddMember, cmdRemoveMember, cmdSuffrage:
		return n.memberCommand(ctx, args)
	}
	return command.Error(command.ErrUnknownCommand(string(args[0]), args[1:]))
}

// serveForward is raftset.forward on the leader. With "withindex" the
// replies are followed by the leader's applied index once they were
// answered (WAIT on the follower compares members against it).
func (n *Node) serveForward(ctx context.Context, req forwardReq) []byte {
	var replies [][]byte
	if len(req.ops) > 0 {
		replies = n.w.submit(ctx, req.ops, false)
	}
	size := 32
	for _, r := range replies {
		size += len(r)
	}
	count := len(replies)
	if req.withIndex {
		count++
	}
	out := command.AppendArray(make([]byte, 0, size), count)
	for _, r := range replies {
		out = append(out, r...)
	}
	if req.withIndex {
		out = command.AppendInt(out, int64(n.fsm.AppliedIndex()))
	}
	return out
}

// serveReadIndex is raftset.readindex on the leader: steps 1-4 of a
// linearizable read, answering the index the follower waits for.
//
// A target of 0 tells the leader "my state includes everything up to my
// snapshot floor", which says nothing about a follower (after a restart
// each node restored its own snapshot and may still be replaying). Then the
// leader first commits a command entry of its own (republishing its client
// address, which changes nothing), so that the target is an index every
// replica's state machine reaches.
func (n *Node) serveReadIndex(ctx context.Context) []byte {
	target, reply := n.readIndex(ctx)
	if reply == nil && target == 0 && n.rd.floor.Load() > 0 {
		addr := n.cfg.ClientAddr
		if addr == "" {
			addr = n.ClientAddr(n.cfg.NodeID)
		}
		switch _, o := n.proposeNodeAddr(ctx, []byte(n.cfg.NodeID), []byte(addr)); o {
		case notApplied, outcomeUnknown:
			return replyReadLostLeader
		}
		target, reply = n.readIndex(ctx)
	}
	if reply != nil {
		return reply
	}
	return command.AppendInt(nil, int64(target))
}

// serveApplied is raftset.applied: this node's applied index.
func (n *Node) serveApplied() []byte {
	return command.AppendInt(nil, int64(n.fsm.AppliedIndex()))
}

// serveOnLeader is raftset.onleader: a leader-only command relayed by a
// follower, run here only if this node leads.
func (n *Node) serveOnLeader(ctx context.Context, args [][]byte) []byte {
	if len(args) < 2 {
		return command.Error(command.ErrArity(cmdOnLeader))
	}
	if n.raft.State() != raft.Leader {
		return constReply("TRYAGAIN " + strings.ToUpper(string(args[1])) + " was not run: this node is no longer the leader, retry")
	}
	return n.leaderCommand(ctx, args[1:])
}

// serveNodeAddr is raftset.node on the leader: the address goes through the
// log. The state machine's own reply to the entry is not the call's answer:
// only whether the entry was applied is.
func (n *Node) serveNodeAddr(ctx context.Context, req nodeAddrReq) []byte {
	reply, o := n.proposeNodeAddr(ctx, req.id, req.addr)
	if o != applied {
		return reply
	}
	return command.OK
}

// proposeNodeAddr proposes id's client address and returns the writer's
// reply and whether the entry was applied.
func (n *Node) proposeNodeAddr(ctx context.Context, id, addr []byte) ([]byte, outcomeKind) {
	return n.publishNodeAddr(ctx, string(id), string(addr))
}

// servePromote is raftset.promote on the leader: a non-voter becomes a
// voter once it reported an applied index within Config.PromoteLag entries
// of the leader's.
func (n *Node) servePromote(req promoteReq) []byte {
	id := string(req.id)
	if lag := n.promoteLag(req.applied); lag > n.cfg.PromoteLag {
		n.st.promotionsRefused.Add(1)
		return constReply("TRYAGAIN not promoted: " + id + " is " + itoa(lag) +
			" entries behind the leader (promote-lag " + itoa(n.cfg.PromoteLag) + ")")
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raftError("promote", err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			if s.Suffrage == raft.Voter {
				return command.OK
			}
			if err := n.raft.AddVoter(s.ID, s.Address, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return raftError("promote", err)
			}
			n.log.Info("promoted member to voter", "id", s.ID)
			return command.OK
		}
	}
	return command.Error("ERR no member with id " + id)
}

// serveLeader is raftset.leader: the leader's id and client address as this
// replica knows them (empty when it knows none) and its Raft term.
func (n *Node) serveLeader() []byte {
	term := n.raft.CurrentTerm()
	id, addr := n.leaderClient()
	out := command.AppendArray(nil, 3)
	out = command.AppendBulkString(out, id)
	out = command.AppendBulkString(out, addr)
	return command.AppendInt(out, int64(term))
}
