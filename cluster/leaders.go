package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
)

// Leader spreading (docs/sharding.md, Placement): RAFT.SHARD
// BALANCE-LEADERS runs on the metadata leader's process, as MOVESLOTS
// does, which asks each shard who leads it, computes a fair assignment
// (AssignLeaders: each process leads floor or ceiling of shards/processes,
// preferred leaders first) and moves the leaderships that differ, one
// Raft leadership transfer at a time, each confirmed by the shard before
// the next. Nothing moves while the leaders are already as even as the
// assignment would make them: a transfer costs the shard a moment without
// a leader.

const (
	// cmdBalanceLeaders is RAFT.SHARD BALANCE-LEADERS relayed to the
	// metadata leader's process: raftset.shard <MetaGroup>
	// raftset.balanceleaders run|dry-run [relayed].
	cmdBalanceLeaders = "raftset.balanceleaders"
	// cmdTransfer is raftset.transfer <node id>: RAFT.TRANSFER to that
	// member on a shard's leader, relayed by its followers.
	cmdTransfer = "raftset.transfer"

	// transferWait bounds how long one transfer may take to show: the
	// shard's members name the new leader.
	transferWait = 15 * time.Second
)

// runAgain is relayToMeta's advice, when the outcome of a relayed command
// is unknown, for a command whose repeat completes it and does nothing
// twice: it finds what the first run did and answers as that run would
// have (+OK, the same shard id), resumes a move, or plans anew.
const runAgain = "run it again to complete it"

// relayToMeta runs a metadata-leader command here when this process's
// metadata voter leads (run), else sends args to the metadata leader's
// process: one hop from a voter (marked relayed, so never relayed again),
// two from a process outside the group. what names it in errors; again
// tells the client what to do when the connection to the metadata leader
// failed mid-call (runAgain, or what to check first where a repeat is not
// harmless or answers differently), since the command may have run.
func (h *Host) relayToMeta(ctx context.Context, what, again string, args [][]byte, relayed bool, run func() []byte) []byte {
	meta := h.MetaNode()
	if meta != nil && meta.IsLeader() {
		return run()
	}
	if relayed && meta != nil {
		return command.Error("TRYAGAIN " + what + " was not run: this node no longer leads the metadata group, retry")
	}
	var addrs []string
	if meta != nil {
		if _, a := meta.leaderClient(); a != "" {
			addrs = append(addrs, a)
		}
		args = append(args, relayedArg)
	} else {
		for _, v := range h.metaVoters() {
			if a := h.clientAddr(v); a != "" {
				addrs = append(addrs, a)
			}
		}
	}
	for _, a := range addrs {
		o := h.call(ctx, &h.movePool, a, MetaGroup, args)
		switch o.kind {
		case applied, refused:
			return o.reply
		case outcomeUnknown, garbled:
			return command.Error("CLUSTERDOWN " + what + ": the connection to the metadata leader failed; " + again)
		}
	}
	return command.Error("TRYAGAIN " + what + " was not run: no reachable metadata leader, retry")
}

// balanceLeaders is RAFT.SHARD BALANCE-LEADERS [DRY-RUN].
func (h *Host) balanceLeaders(ctx context.Context, dry, relayed bool) []byte {
	mode := "run"
	if dry {
		mode = "dry-run"
	}
	args := [][]byte{[]byte(cmdBalanceLeaders), []byte(mode)}
	return h.relayToMeta(ctx, "BALANCE-LEADERS", runAgain, args, relayed, func() []byte {
		h.balanceMu.Lock()
		defer h.balanceMu.Unlock()
		moves, err := h.driveBalance(ctx, dry, 0)
		if err != nil {
			done := ""
			if len(moves) > 0 {
				done = " (done before it: " + strings.Join(moves, "; ") + ")"
			}
			return command.Error("ERR BALANCE-LEADERS: " + err.Error() + done)
		}
		out := command.AppendArray(nil, len(moves))
		for _, mv := range moves {
			out = command.AppendBulkString(out, mv)
		}
		return out
	})
}

// driveBalance moves leaderships to AssignLeaders' choice, or with dry
// only lists the moves, as "shard <id>: <from> -> <to>"; limit > 0 stops it
// after that many transfers (the automatic balancer's one per period: the
// plan is computed anew from the leaders then, not carried over). A member
// is a candidate only if its process answers that it follows the shard's
// leader: a node that is down is planned around, not tried (a transfer to
// it could only fail, and stop the run).
func (h *Host) driveBalance(ctx context.Context, dry bool, limit int) ([]string, error) {
	m := h.Map()
	cur := map[uint32]string{}
	for _, sh := range m.Shards {
		id, err := h.shardLeader(ctx, sh.ID)
		if err != nil {
			return nil, err
		}
		cur[sh.ID] = id
	}
	shards := make([]Shard, len(m.Shards))
	for i, sh := range m.Shards {
		shards[i] = sh
		shards[i].Members = slices.DeleteFunc(slices.Clone(sh.Members), func(mem string) bool {
			return mem != cur[sh.ID] && !h.follows(ctx, sh.ID, mem, cur[sh.ID])
		})
	}
	target := AssignLeaders(shards, cur)
	if leaderSpread(m, cur) <= leaderSpread(m, target) {
		return nil, nil
	}
	var moves []string
	for _, sh := range m.Shards {
		from, to := cur[sh.ID], target[sh.ID]
		if from == to {
			continue
		}
		mv := fmt.Sprintf("shard %d: %s -> %s", sh.ID, from, to)
		if !dry {
			if err := h.transferShard(ctx, sh.ID, to); err != nil {
				return moves, fmt.Errorf("shard %d to %s: %w", sh.ID, to, err)
			}
			h.log.Info("moved a shard's leadership", "shard", sh.ID, "from", from, "to", to)
		}
		moves = append(moves, mv)
		if limit > 0 && len(moves) == limit {
			break
		}
	}
	return moves, nil
}

// follows says whether node's replica of shard id answers (within a
// second) that leader leads it.
func (h *Host) follows(ctx context.Context, id uint32, node, leader string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var r []byte
	if node == h.self {
		n, ok := h.Node(id)
		if !ok {
			return false
		}
		r = n.Internal(ctx, [][]byte{[]byte(cmdLeader)})
	} else {
		addr := h.clientAddr(node)
		if addr == "" {
			return false
		}
		o := h.call(ctx, &h.pool, addr, id, [][]byte{[]byte(cmdLeader)})
		if o.kind != applied {
			return false
		}
		r = o.reply
	}
	l, ok := parseLeaderReply(r)
	return ok && l.id == leader
}

// leaderSpread is the most shards a member node of m leads in leaders
// minus the fewest.
func leaderSpread(m *ShardMap, leaders map[uint32]string) int {
	count := map[string]int{}
	for _, sh := range m.Shards {
		for _, mem := range sh.Members {
			count[mem] += 0
		}
	}
	for _, l := range leaders {
		count[l]++
	}
	lo, hi := -1, 0
	for _, c := range count {
		if lo < 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	return hi - max(lo, 0)
}

// shardLeader is the node id that leads shard id as its replica here, or
// its first member that answers, knows; TRYAGAIN while none knows one.
func (h *Host) shardLeader(ctx context.Context, id uint32) (string, error) {
	r, err := h.retry(ctx, func() []byte {
		r := h.shardCall(ctx, id, [][]byte{[]byte(cmdLeader)})
		if command.IsError(r) {
			return r
		}
		l, ok := parseLeaderReply(r)
		if !ok {
			return command.Error("ERR " + cmdLeader + ": unexpected reply " + strconv.Quote(string(r)))
		}
		if l.id == "" {
			return command.Error("TRYAGAIN shard " + strconv.FormatUint(uint64(id), 10) + " has no known leader")
		}
		return command.AppendBulkString(nil, l.id)
	})
	if err != nil {
		return "", fmt.Errorf("the leader of shard %d: %w", id, err)
	}
	v, _ := respwire.Parse(r)
	return v.Str, nil
}

// transferShard moves shard id's leadership to node to and waits until
// the shard names it its leader.
func (h *Host) transferShard(ctx context.Context, id uint32, to string) error {
	if _, err := h.retry(ctx, func() []byte {
		return h.shardCall(ctx, id, [][]byte{[]byte(cmdTransfer), []byte(to)})
	}); err != nil {
		return err
	}
	var l string
	var err error
	perr := h.poll(ctx, transferWait, 50*time.Millisecond, func() bool {
		l, err = h.shardLeader(ctx, id)
		return err == nil && l == to
	})
	if !errors.Is(perr, errPollLimit) {
		return perr
	}
	if err == nil {
		err = errors.New("the shard's leader is " + l)
	}
	return fmt.Errorf("the transfer did not show within %s: %w", transferWait, err)
}
