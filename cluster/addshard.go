package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/command"
	"raftset/internal/strictint"
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

const (
	// cmdAddShard is RAFT.SHARD ADDSHARD relayed to the metadata leader's
	// process: raftset.addshard <member,member,...> [relayed].
	cmdAddShard = "raftset.addshard"
	// cmdAddShardID is ADDSHARD ID <shard> relayed:
	// raftset.addshardid <shard> <member,member,...> [relayed]. A name of
	// its own, so that an older metadata leader refuses it as unknown
	// rather than take the id for the relayed mark and add a shard that a
	// repeat would add again.
	cmdAddShardID = "raftset.addshardid"
)

// addShardReq is an ADDSHARD: the new shard's members and, with ID
// <shard>, the id the client expects it to get. The id is what makes the
// command safe to repeat: a repeat finds the shard in the map and answers
// its id, where one without it would add another shard. Without it, two
// shards of the same members are not a repeat (three nodes can hold any
// number of shards), so nothing tells a repeat from a second shard.
type addShardReq struct {
	members []string
	id      uint32
	given   bool
}

// addShard is RAFT.SHARD ADDSHARD [ID <shard>] member ...
func (h *Host) addShard(ctx context.Context, req addShardReq, relayed bool) []byte {
	list := strings.Join(req.members, ",")
	args := [][]byte{[]byte(cmdAddShard), []byte(list)}
	again := "it may have added a shard: before running it again, look in RAFT.SHARD MAP for a shard with no slot whose members are " +
		list + " (ADDSHARD ID <shard> ... is safe to run again)"
	if req.given {
		args = [][]byte{[]byte(cmdAddShardID), []byte(strconv.FormatUint(uint64(req.id), 10)), []byte(list)}
		again = runAgain
	}
	return h.relayToMeta(ctx, "ADDSHARD", again, args, relayed, func() []byte {
		h.moveMu.Lock()
		defer h.moveMu.Unlock()
		id, err := h.driveAddShard(ctx, req)
		if err != nil {
			return command.Error("ERR ADDSHARD: " + err.Error())
		}
		return command.AppendInt(nil, int64(id))
	})
}

func (h *Host) driveAddShard(ctx context.Context, req addShardReq) (uint32, error) {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return 0, err
	}
	if cur == nil {
		return 0, fmt.Errorf("the cluster map is not bootstrapped yet")
	}
	members := req.members
	if req.given {
		if sh, ok := cur.Shard(req.id); ok {
			if !slices.Equal(slices.Sorted(slices.Values(sh.Members)), slices.Sorted(slices.Values(members))) {
				return 0, fmt.Errorf("shard %d exists with members %s", req.id, strings.Join(sh.Members, ","))
			}
			// A repeat after a lost reply (or while the first still
			// waits for a leader: moveMu ordered them): answered as the
			// first run is, once the shard has a leader.
			return req.id, h.awaitNewShard(ctx, req.id)
		}
		if cur.shardRemoved(req.id) {
			return 0, fmt.Errorf("shard %d was removed (RAFT.SHARD REMOVESHARD), and an id is never given again", req.id)
		}
		if next := cur.nextShardID(); req.id != next {
			return 0, fmt.Errorf("the next shard id is %d, not %d", next, req.id)
		}
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
	return id, h.awaitNewShard(ctx, id)
}

// awaitNewShard waits until shard id, in the map, names a leader.
func (h *Host) awaitNewShard(ctx context.Context, id uint32) error {
	if _, err := h.shardLeader(ctx, id); err != nil {
		return fmt.Errorf("shard %d is in the map but has no leader yet (its members start it within a map refresh): %w", id, err)
	}
	return nil
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

// addShardArgs checks ADDSHARD's arguments: [ID <shard>] <member> ...
// (a node named ID is named after the first member).
func addShardArgs(args [][]byte) (addShardReq, []byte) {
	var req addShardReq
	if len(args) >= 2 && strings.EqualFold(string(args[0]), "id") {
		id, ok := strictint.Parse(args[1])
		if !ok || id < 0 || id >= int64(MetaGroup) {
			return req, command.Error("ERR ADDSHARD ID wants a shard id (an integer) and the new shard's members")
		}
		req.id, req.given = uint32(id), true
		args = args[2:]
	}
	if len(args) == 0 {
		return req, command.Error("ERR ADDSHARD wants the new shard's members (node ids)")
	}
	req.members = make([]string, len(args))
	for i, a := range args {
		if err := CheckNodeID(string(a)); err != nil {
			return req, command.Error("ERR ADDSHARD: " + err.Error())
		}
		req.members[i] = string(a)
	}
	return req, nil
}

// addShardInternal is raftset.addshard <members> [relayed] and
// raftset.addshardid <shard> <members> [relayed] from the process that
// relayed them.
func (h *Host) addShardInternal(ctx context.Context, args [][]byte) []byte {
	var opts [][]byte
	if strings.EqualFold(string(args[0]), cmdAddShardID) {
		if len(args) != 3 && len(args) != 4 {
			return command.Error(command.ErrArity(cmdAddShardID))
		}
		opts = [][]byte{[]byte("id"), args[1]}
		args = args[1:] // as raftset.addshard's: the members, then the mark
	} else if len(args) != 2 && len(args) != 3 {
		return command.Error(command.ErrArity(cmdAddShard))
	}
	for _, m := range strings.Split(string(args[1]), ",") {
		opts = append(opts, []byte(m))
	}
	req, bad := addShardArgs(opts)
	if bad != nil {
		return bad
	}
	return h.addShard(ctx, req, len(args) == 3)
}
