package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"raftset/internal/command"
)

// Adding a shard (docs/sharding.md, Placement): RAFT.SHARD ADDSHARD
// <member> ... runs on the metadata leader's process, which adds a shard
// that owns no slot to the map (the next id, one compare-and-set); every
// process named as a member starts its replica (a new Raft group on the
// shared port, bootstrapped by the members alike) when its map refresh
// sees it, and the command answers once the shard has a leader. It owns
// no slot until slots are moved to it (raftset cluster rebalance); its
// state machine starts owning every slot with no key, as every shard
// does, and the move's drop-before-import gives the range up first.

// cmdAddShard is RAFT.SHARD ADDSHARD relayed to the metadata leader's
// process: raftset.addshard <member,member,...> [relayed].
const cmdAddShard = "raftset.addshard"

// addShard is RAFT.SHARD ADDSHARD member ...
func (h *Host) addShard(ctx context.Context, members []string, relayed bool) []byte {
	args := [][]byte{[]byte(cmdAddShard), []byte(strings.Join(members, ","))}
	return h.relayToMeta(ctx, "ADDSHARD", args, relayed, func() []byte {
		h.moveMu.Lock()
		defer h.moveMu.Unlock()
		id, err := h.driveAddShard(ctx, members)
		if err != nil {
			return command.Error("ERR ADDSHARD: " + err.Error())
		}
		return command.AppendInt(nil, int64(id))
	})
}

func (h *Host) driveAddShard(ctx context.Context, members []string) (uint32, error) {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return 0, err
	}
	if cur == nil {
		return 0, fmt.Errorf("the cluster map is not bootstrapped yet")
	}
	for i, m := range members {
		if cur.removed(m) {
			return 0, fmt.Errorf("node %s was removed from the cluster (RAFT.SHARD REMOVENODE); add it again first (RAFT.SHARD ADDNODE)", m)
		}
		if _, ok := h.raftAddrIn(cur, m); !ok && m != h.self {
			return 0, fmt.Errorf("node %q is not in peers, nor added by RAFT.SHARD ADDNODE", m)
		}
		if slices.Contains(members[:i], m) {
			return 0, fmt.Errorf("node %s named twice", m)
		}
	}
	id := cur.nextShardID()
	if id >= MetaGroup {
		return 0, fmt.Errorf("no shard id left")
	}
	next := cur.clone()
	next.Epoch++
	next.Shards = append(next.Shards, Shard{ID: id, Members: slices.Clone(members)})
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return 0, fmt.Errorf("adding shard %d: %w", id, err)
	}
	h.log.Info("added a shard", "shard", id, "members", strings.Join(members, ","), "epoch", next.Epoch)
	h.startNewShards()
	if _, err := h.shardLeader(ctx, id); err != nil {
		return 0, fmt.Errorf("shard %d is in the map but has no leader yet (its members start it within a map refresh): %w", id, err)
	}
	return id, nil
}

// startNewShards starts this process's replica of every shard of the map
// that names it a member and is not held here yet. Called by the map
// refresh (and the driver that added one), one at a time.
func (h *Host) startNewShards() {
	h.startMu.Lock()
	defer h.startMu.Unlock()
	if h.closing {
		return // Close owns the shards now
	}
	held := h.held.Load()
	var added []Shard
	for _, sh := range h.Map().Shards {
		if _, ok := held.nodes[sh.ID]; !ok && slices.Contains(sh.Members, h.self) {
			added = append(added, sh)
		}
	}
	if len(added) == 0 {
		return
	}
	if home, ok := h.Map().Home(h.self); ok && h.Home() == nil {
		// The first replica started becomes the home (startShard): the
		// one the map names, so that a process started with none gets
		// the home it had before a restart, not its lowest id.
		if i := slices.IndexFunc(added, func(sh Shard) bool { return sh.ID == home }); i > 0 {
			added[0], added[i] = added[i], added[0]
		}
	}
	next := &heldShards{nodes: make(map[uint32]*Node, len(held.nodes)+len(added)), ids: slices.Clone(held.ids)}
	for id, n := range held.nodes {
		next.nodes[id] = n
	}
	for _, sh := range added {
		n, err := h.startShard(sh)
		if err != nil {
			h.log.Error("starting a shard the map added", "shard", sh.ID, "error", err)
			continue
		}
		next.nodes[sh.ID] = n
		next.ids = append(next.ids, sh.ID)
		h.log.Info("started a shard the map added", "shard", sh.ID)
	}
	slices.Sort(next.ids)
	h.held.Store(next)
}

// addShardArgs checks ADDSHARD's members.
func addShardArgs(args [][]byte) ([]string, []byte) {
	if len(args) == 0 {
		return nil, command.Error("ERR ADDSHARD wants the new shard's members (node ids)")
	}
	out := make([]string, len(args))
	for i, a := range args {
		if err := CheckNodeID(string(a)); err != nil {
			return nil, command.Error("ERR ADDSHARD: " + err.Error())
		}
		out[i] = string(a)
	}
	return out, nil
}
