package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"raftset/internal/respwire"
)

// A lost member (docs/operations.md, Recover): after raftset recover
// rewrote a shard's group to its survivors, the map still names the
// members lost with their machines, which are in no Raft configuration
// any more. REMOVEREPLICA of such a member changes the map alone: there
// is nothing to remove from the group, and nobody to ask for the group's
// leadership. Its rules protect a running group and a running process:
// the majority rule counts replicas the group no longer has (after a
// recovery to one survivor, every lost member would be refused), and the
// only-or-home rule protects a process that answers, which a lost one
// does not.

// outOfGroup says whether node is in no configuration of shard id's group,
// as the group's leader answers (raftset.suffrage).
func (h *Host) outOfGroup(ctx context.Context, id uint32, node string) (bool, error) {
	r, err := h.retry(ctx, func() []byte {
		return h.shardCall(ctx, id, [][]byte{[]byte(cmdSuffrage), []byte(node)})
	})
	if err != nil {
		return false, fmt.Errorf("asking shard %d's leader whether %s is a member: %w", id, node, err)
	}
	v, err := respwire.Parse(r)
	if err != nil || v.Kind != '$' {
		return false, fmt.Errorf("asking shard %d's leader whether %s is a member: answer %q", id, node, r)
	}
	return v.Str == "", nil
}

// forgetReplica drops node, which shard id's group no longer has, from
// the shard's members in the map cur.
func (h *Host) forgetReplica(ctx context.Context, cur *ShardMap, id uint32, node string) error {
	if home, ok := h.answeringHome(ctx, cur, node); ok {
		// A running process keeps its replica of its home shard (and of
		// its last one) whatever the map says (stopRemovedShards).
		if held := cur.Hosts(node); len(held) == 1 || home == id {
			return fmt.Errorf("shard %d is node %s's only or home shard, and its process answers; add it another replica first", id, node)
		}
	}
	next := cur.withoutMember(id, node)
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("dropping %s from shard %d's members: %w", node, id, err)
	}
	h.log.Info("removed a member the group had lost from the map", "shard", id, "node", node, "epoch", next.Epoch)
	h.stopRemovedShards()
	return nil
}

// answeringHome is node's home shard as its process answers it
// (raftset.home), and false when the process does not answer: lost, or
// holding no replica.
func (h *Host) answeringHome(ctx context.Context, m *ShardMap, node string) (uint32, bool) {
	if node == h.self {
		if home := h.Home(); home != nil {
			return home.cfg.Shard, true
		}
		return 0, false
	}
	addr := h.clientAddrIn(m, node)
	if addr == "" {
		return 0, false
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	o := h.call(cctx, &h.pool, addr, MetaGroup, [][]byte{[]byte(cmdHome)})
	if o.kind != applied {
		return 0, false
	}
	v, err := respwire.Parse(o.reply)
	if err != nil || v.Kind != ':' {
		return 0, false
	}
	id, err := strconv.ParseUint(v.Str, 10, 32)
	return uint32(id), err == nil
}
