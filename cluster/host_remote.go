package cluster

// Leaders of shards not held here, learnt from their members, so that
// -MOVED points at them.

import (
	"context"
	"slices"
	"strconv"
	"time"

	"raftset/internal/respwire"
)

// runRemote keeps the leaders of the shards not held here.
func (h *Host) runRemote() {
	defer h.wg.Done()
	t := time.NewTicker(remoteRefresh)
	defer t.Stop()
	for {
		h.refreshMap()
		h.startNewShards()
		h.stopRemovedShards()
		h.syncMeta()
		h.refreshRemote()
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// refreshRemote asks a member of each shard not held here for its leader
// (the first member that knows one); a shard none of whose members answers
// is forgotten, and its slots are redirected to a member again.
func (h *Host) refreshRemote() {
	m := h.Map()
	for _, sh := range m.Shards {
		if _, ok := h.held.Load().nodes[sh.ID]; !ok {
			h.refreshShard(m, sh)
		}
	}
}

// refreshShard asks sh's members, in order, until one names its leader; a
// member that does not answer costs at most a second.
func (h *Host) refreshShard(m *ShardMap, sh Shard) {
	var found *remoteLeader
	for _, mem := range sh.Members {
		addr := h.clientAddrIn(m, mem)
		if addr == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		o := h.call(ctx, &h.pool, addr, sh.ID, [][]byte{[]byte(cmdLeader)})
		cancel()
		if o.kind != applied {
			continue
		}
		r, ok := parseLeaderReply(o.reply)
		if !ok || r.id == "" || r.addr == "" {
			continue
		}
		if !slices.Contains(sh.Members, r.id) {
			// A leader REMOVEREPLICA took out of the shard, which this
			// member has not seen replaced yet: -MOVED there would come
			// back (its process no longer holds the shard).
			continue
		}
		term, _ := strconv.ParseUint(r.term, 10, 64)
		found = &remoteLeader{id: r.id, addr: r.addr, term: term}
		break
	}
	h.remoteMu.Lock()
	if found != nil {
		h.remote[sh.ID] = *found
	} else {
		delete(h.remote, sh.ID)
	}
	h.remoteMu.Unlock()
}

func (h *Host) remoteLeader(id uint32) (remoteLeader, bool) {
	h.remoteMu.Lock()
	defer h.remoteMu.Unlock()
	l, ok := h.remote[id]
	return l, ok
}

// leaderReply is a replica's answer to cmdLeader: the leader it knows (id
// empty: none), the leader's client address and its term.
type leaderReply struct{ id, addr, term string }

// parseLeaderReply reads a cmdLeader answer; false for anything else (an
// error reply included).
func parseLeaderReply(r []byte) (leaderReply, bool) {
	v, err := respwire.Parse(r)
	if err != nil || v.Kind != '*' || len(v.Elems) != 3 {
		return leaderReply{}, false
	}
	return leaderReply{id: v.Elems[0].Str, addr: v.Elems[1].Str, term: v.Elems[2].Str}, true
}
