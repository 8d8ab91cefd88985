package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/command"
)

// Removing a shard (docs/sharding.md, Placement): RAFT.SHARD REMOVESHARD
// <shard> [DRY-RUN] runs on the metadata leader's process (relayToMeta, as
// ADDSHARD) once the shard owns no slot (raftset cluster rebalance or
// move-slots moved them off): one compare-and-set drops the shard from the
// map and writes a "removed-shard <id>" line, and every process holding a
// replica of it closes that replica on its next map refresh, as for
// REMOVEREPLICA (stopRemovedShards). Nothing is asked of the shard's Raft
// group: once no process runs a replica it is gone, and its directories
// stay for the operator to delete. The line is what lets a repeat after a
// lost reply answer +OK rather than "no shard", and what keeps ADDSHARD
// from giving a later shard the id (nextShardID): a member still has the
// old group's directory under that id, whose Raft state a new group must
// not start from.

// cmdRemoveShard is RAFT.SHARD REMOVESHARD relayed to the metadata
// leader's process: raftset.removeshard <shard> <run|dry-run> [relayed].
const cmdRemoveShard = "raftset.removeshard"

// removeShardCmd is RAFT.SHARD REMOVESHARD <shard> [DRY-RUN].
func (h *Host) removeShardCmd(ctx context.Context, args [][]byte) []byte {
	if len(args) != 3 && len(args) != 4 {
		return command.Error(command.ErrArity("raft.shard|removeshard"))
	}
	mode := []byte("run")
	if len(args) == 4 {
		if !strings.EqualFold(string(args[3]), "dry-run") {
			return command.Error("ERR REMOVESHARD takes no argument after <shard> but DRY-RUN")
		}
		mode = []byte("dry-run")
	}
	return h.removeShard(ctx, args[2], mode, false)
}

// removeShard checks <shard> and has the metadata leader's process remove
// it (or only check that it would, mode "dry-run"); relayed: sent by a
// metadata voter.
func (h *Host) removeShard(ctx context.Context, shard, mode []byte, relayed bool) []byte {
	id, err := strconv.ParseUint(string(shard), 10, 32)
	if err != nil || id >= uint64(MetaGroup) {
		return command.Error("ERR REMOVESHARD wants <shard> [DRY-RUN]: shard id is not an integer")
	}
	dry := string(mode) == "dry-run"
	args := [][]byte{[]byte(cmdRemoveShard), shard, mode}
	return h.relayToMeta(ctx, "REMOVESHARD", runAgain, args, relayed, func() []byte {
		h.moveMu.Lock()
		defer h.moveMu.Unlock()
		if err := h.driveRemoveShard(ctx, uint32(id), dry); err != nil {
			return command.Error("ERR REMOVESHARD: " + err.Error())
		}
		return command.OK
	})
}

// driveRemoveShard removes shard id from the map, or with dry only runs
// its checks. A shard removed already is +OK with nothing changed.
func (h *Host) driveRemoveShard(ctx context.Context, id uint32, dry bool) error {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("the cluster map is not bootstrapped yet")
	}
	if cur.shardRemoved(id) {
		return nil
	}
	if err := cur.removeShardRefusal(id, h.bootstrap.Shards[0].ID); err != nil {
		return err
	}
	sh, _ := cur.Shard(id)
	// A member's home (keyless commands, ACL users) goes last, as
	// REMOVEREPLICA keeps it: a process that holds other replicas would
	// lose the shard its keyless commands and users live in.
	for _, node := range sh.Members {
		if len(cur.Hosts(node)) > 1 && h.isHome(ctx, cur, node, id) {
			return fmt.Errorf("shard %d is node %s's home shard (its keyless commands and ACL users) while it holds replicas of other shards; a home goes last: remove those first", id, node)
		}
	}
	if dry {
		return nil
	}
	next := cur.withoutShard(id)
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("dropping shard %d from the map: %w", id, err)
	}
	h.log.Info("removed a shard", "shard", id, "members", strings.Join(sh.Members, ","), "epoch", next.Epoch)
	h.stopRemovedShards()
	return nil
}

// removeShardRefusal says why shard id cannot leave m without asking any
// process (the home rule does): first is the bootstrap map's first shard.
func (m *ShardMap) removeShardRefusal(id, first uint32) error {
	sh, ok := m.Shard(id)
	if !ok {
		return fmt.Errorf("no shard %d", id)
	}
	if len(m.Shards) == 1 {
		return fmt.Errorf("shard %d is the cluster's only shard", id)
	}
	if id == first {
		// Its members are the metadata group's voters unless ADDMETA or
		// REMOVEMETA changed them (metavoters.go), and where a process
		// started with the shard-map directive asks for the map first;
		// the map gives their client addresses through it.
		return fmt.Errorf("shard %d is the first shard of the map the cluster was created with, through whose members processes started with the shard-map directive find the metadata group: it stays", id)
	}
	if i := slices.IndexFunc(m.Moves, func(mv SlotMove) bool { return mv.From == id || mv.To == id }); i >= 0 {
		mv := m.Moves[i]
		abort := "RAFT.SHARD ABORT"
		if len(m.Moves) > 1 {
			abort += fmt.Sprintf(" %d %d", mv.First, mv.Last)
		}
		return fmt.Errorf("slots %d-%d are moving from shard %d to shard %d: let the move complete (RAFT.SHARD MOVESLOTS again) or undo it (%s) first", mv.First, mv.Last, mv.From, mv.To, abort)
	}
	if len(sh.Ranges) > 0 {
		n := 0
		var ranges []string
		for i, r := range sh.Ranges {
			n += r[1] - r[0] + 1
			switch {
			case i < 3 && r[0] == r[1]:
				ranges = append(ranges, strconv.Itoa(r[0]))
			case i < 3:
				ranges = append(ranges, fmt.Sprintf("%d-%d", r[0], r[1]))
			case i == 3:
				ranges = append(ranges, "...")
			}
		}
		return fmt.Errorf("shard %d still owns %d slots (%s): move them to other shards first (raftset cluster move-slots)", id, n, strings.Join(ranges, ","))
	}
	return nil
}

// withoutShard is the next epoch of m without shard id (which owns no
// slot), recorded as removed; every member's home line stays true.
func (m *ShardMap) withoutShard(id uint32) *ShardMap {
	sh, _ := m.Shard(id)
	type home struct {
		id uint32
		ok bool
	}
	homes := map[string]home{}
	for _, node := range sh.Members {
		h, ok := m.Home(node)
		homes[node] = home{h, ok}
	}
	next := m.clone()
	next.Epoch++
	next.Shards = slices.DeleteFunc(next.Shards, func(s Shard) bool { return s.ID == id })
	delete(next.Added, id)
	if len(next.Added) == 0 {
		next.Added = nil
	}
	for node, hm := range homes {
		next.setHome(node, hm.id, hm.ok)
	}
	i, _ := slices.BinarySearch(next.RemovedShards, id)
	next.RemovedShards = slices.Insert(next.RemovedShards, i, id)
	return next
}

// shardRemoved says whether RAFT.SHARD REMOVESHARD removed shard id.
func (m *ShardMap) shardRemoved(id uint32) bool {
	_, ok := slices.BinarySearch(m.RemovedShards, id)
	return ok
}

// nextShardID is the id ADDSHARD gives a new shard: past every shard of
// the map and every removed one.
func (m *ShardMap) nextShardID() uint32 {
	id := m.Shards[len(m.Shards)-1].ID + 1
	if n := len(m.RemovedShards); n > 0 && m.RemovedShards[n-1] >= id {
		id = m.RemovedShards[n-1] + 1
	}
	return id
}

// removeShardArgs is REMOVESHARD's check of raftset.removeshard's
// arguments on the process it was relayed to.
func removeShardArgs(args [][]byte) (shard, mode []byte, relayed bool, bad []byte) {
	if len(args) != 3 && len(args) != 4 {
		return nil, nil, false, command.Error(command.ErrArity(cmdRemoveShard))
	}
	if m := string(args[2]); m != "run" && m != "dry-run" {
		return nil, nil, false, command.Error("ERR " + cmdRemoveShard + ": bad mode " + strconv.Quote(m))
	}
	return args[1], args[2], len(args) == 4, nil
}
