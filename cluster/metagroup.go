package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/respwire"
)

// The metadata group (docs/sharding.md, The metadata group) is a Raft group
// on the shared port (group MetaGroup) whose voters are the members of the
// bootstrap map's first shard, until RAFT.SHARD ADDMETA and REMOVEMETA
// change them (metavoters.go). Its state machine is raftset's own, used as
// a store of two string keys: the encoded cluster map (ShardMap.Encode,
// epoch inside) and the shard-map directive it was bootstrapped from. The
// map only changes by a compare-and-set script (metaCAS) from the map a
// change was computed from to the next, so two drivers can never both
// apply a change computed from the same map, and snapshots, restores,
// forwarding to the leader and linearizable reads are the keyspace's,
// already tested.
const (
	metaDir     = "meta"
	metaMapKey  = "{raftset-meta}map"
	metaBootKey = "{raftset-meta}bootstrap"
	// cmdMetaMap asks a metadata member for the map, after a read barrier
	// (raftset.shard <MetaGroup> raftset.metamap): how processes outside
	// the group learn it.
	cmdMetaMap = "raftset.metamap"
	// metaCASScript replaces KEYS[1] by ARGV[2] only if it holds ARGV[1].
	metaCASScript = `if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('set', KEYS[1], ARGV[2])
return 1`
)

var (
	errMapChanged    = errors.New("the cluster map changed meanwhile")
	errNoMetaReplica = errors.New("metadata group: this node runs no replica of it")
)

// metaVoters are the metadata group's voters as the map in use names them
// (metaVotersIn).
func (h *Host) metaVoters() []string { return h.metaVotersIn(h.Map()) }

// metaVotersIn are the voters map m records (ADDMETA, REMOVEMETA), else
// the members of the bootstrap map's first shard.
func (h *Host) metaVotersIn(m *ShardMap) []string {
	if len(m.Meta) > 0 {
		return m.Meta
	}
	return h.bootstrap.Shards[0].Members
}

// newMetaNode starts this process's replica of the metadata group under
// dir/meta, with voters as its peers; bootstrap: it may bootstrap the
// group when its directory is empty (a member of the directive's first
// shard), else it waits for the group's leader to send it the log.
func (h *Host) newMetaNode(voters []string, bootstrap bool) (*Node, error) {
	mc := h.cfg
	mc.Shard = MetaGroup
	mc.RaftPort = h.port
	mc.DataDir = MetaDir(h.cfg.DataDir)
	mc.Logger = h.cfg.Logger.With("group", "meta")
	mc.Bootstrap = mc.Bootstrap && bootstrap
	mc.Peers = nil
	for _, v := range voters {
		if a, ok := h.raftAddrOf(v); ok {
			mc.Peers = append(mc.Peers, Peer{ID: v, Addr: a})
		}
	}
	n, err := New(mc, fsm.New(fsm.Config{Logger: mc.Logger}))
	if err != nil {
		return nil, fmt.Errorf("cluster: metadata group: %w", err)
	}
	return n, nil
}

// MetaNode is this process's replica of the metadata group, nil when it
// runs none.
func (h *Host) MetaNode() *Node { return h.meta.Load() }

// adopt makes m the map commands are routed by if it is newer than the
// one in use: maps only move forward, whoever hands them over.
func (h *Host) adopt(m *ShardMap) {
	for {
		cur := h.smap.Load()
		if m.Epoch <= cur.Epoch || h.smap.CompareAndSwap(cur, m) {
			return
		}
	}
}

// readMeta reads the replicated map from this process's voter: nil (and
// no error) before it was bootstrapped.
func (h *Host) readMeta(ctx context.Context, stale bool) (*ShardMap, error) {
	raw, err := h.readMetaKey(ctx, metaMapKey, stale)
	if err != nil || raw == nil {
		return nil, err
	}
	return DecodeShardMap(string(raw))
}

func (h *Host) readMetaKey(ctx context.Context, key string, stale bool) ([]byte, error) {
	meta := h.MetaNode()
	if meta == nil {
		return nil, errNoMetaReplica
	}
	r := meta.ReadBatch(ctx, [][][]byte{{[]byte("get"), []byte(key)}}, stale)[0]
	v, err := respwire.Parse(r)
	switch {
	case err != nil:
		return nil, fmt.Errorf("metadata group: GET %s: %w", key, err)
	case v.Kind == '-':
		return nil, fmt.Errorf("metadata group: GET %s: %s", key, v.Str)
	case v.Null:
		return nil, nil
	}
	return []byte(v.Str), nil
}

// refreshMap learns the newest map: a voter reads its own replica (stale:
// it only ever moves the map forward, and a driver's changes are adopted
// by the driver at once), and proposes the bootstrap map while there is
// none; another process asks the voters, which answer after a barrier.
func (h *Host) refreshMap() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	meta := h.MetaNode()
	if meta == nil {
		h.fetchMap(ctx)
		return
	}
	if !meta.isVoter() || !meta.knowsLeader() {
		// A replica removed from the group (REMOVEMETA) may never apply
		// the map that says so, and one still joining has not applied
		// the newest: the voters that remain have it.
		h.fetchMap(ctx)
	}
	m, err := h.readMeta(ctx, true)
	if err != nil {
		h.log.Warn("reading the cluster map", "error", err)
		return
	}
	if m == nil {
		if meta.isVoter() {
			// A replica still joining (no configuration, or a
			// non-voter) proposes nothing: it has no say until it
			// caught up, and its empty store is no sign of a
			// group without a map.
			h.bootstrapMeta(ctx)
		}
		return
	}
	h.adopt(m)
	if !h.bootChecked {
		boot, err := h.readMetaKey(ctx, metaBootKey, true)
		if err == nil {
			h.bootChecked = true
			if want := h.bootstrap.Encode(); string(boot) != want {
				h.log.Warn("shard-map differs from the map this cluster was bootstrapped with: ignored, the replicated map wins (RAFT.SHARD MAP shows it)",
					"bootstrap", string(boot), "directive", want)
			}
		}
	}
}

// bootstrapMeta proposes the shard-map directive as the first map (epoch
// 1). MSETNX makes the first proposal win and every later one a no-op, so
// every voter may try until one of them is applied.
func (h *Host) bootstrapMeta(ctx context.Context) {
	first := h.bootstrap.clone()
	first.Epoch = 1
	boot := h.bootstrap.Encode()
	meta := h.MetaNode()
	if meta == nil {
		return
	}
	r, _ := meta.WriteIndexed(ctx, []command.Op{command.Cmd([]byte("msetnx"),
		[]byte(metaMapKey), []byte(first.Encode()), []byte(metaBootKey), []byte(boot))})
	if command.IsError(r[0]) {
		h.log.Debug("bootstrapping the cluster map", "reply", string(r[0]))
	}
}

// fetchMap asks the metadata voters for the map (then the directive's
// first shard's members), in order from the one
// that answered last (metaFirst). A voter that does not answer moves the
// start past it: a lost machine whose address does not refuse connections
// holds a call until the refresh's deadline, and asked first every time it
// kept this process from ever reaching the voters that remain (before a
// recovery of the group, and after it, when the voters are still the
// directive's).
func (h *Host) fetchMap(ctx context.Context) {
	// After the voters changed, the directive's still answer (a process
	// that left the group hands over the map it knows): the way to the
	// map when no voter's address is known here. A copy: the map's list
	// is shared.
	voters := slices.Clone(h.metaVoters())
	for _, v := range h.bootstrap.Shards[0].Members {
		if !slices.Contains(voters, v) {
			voters = append(voters, v)
		}
	}
	first := int(h.metaFirst.Load()) % len(voters)
	for i := range voters {
		j := (first + i) % len(voters)
		if voters[j] == h.self {
			continue // its replica is read by refreshMap
		}
		if m, ok := h.fetchMapFrom(ctx, voters[j]); ok {
			h.adopt(m)
			return
		}
		h.metaFirst.CompareAndSwap(uint32(j), uint32((j+1)%len(voters)))
		if ctx.Err() != nil {
			// The others were not asked: they must not be passed over too.
			return
		}
	}
}

// fetchMapFrom asks voter v for the map.
func (h *Host) fetchMapFrom(ctx context.Context, v string) (*ShardMap, bool) {
	addr := h.clientAddr(v)
	if addr == "" {
		return nil, false
	}
	o := h.call(ctx, &h.pool, addr, MetaGroup, [][]byte{[]byte(cmdMetaMap)})
	if o.kind != applied {
		return nil, false
	}
	r, err := respwire.Parse(o.reply)
	if err != nil || r.Kind != '$' || r.Null {
		return nil, false
	}
	m, err := DecodeShardMap(r.Str)
	if err != nil {
		h.log.Warn("a cluster map that does not decode", "from", v, "error", err)
		return nil, false
	}
	return m, true
}

// serveMetaMap answers raftset.metamap on a voter: the map after a read
// barrier, so never older than one the caller saw from any voter. A
// process that runs no replica answers the newest map it knows: one that
// the voters left (REMOVEMETA) is still where processes started with the
// directive look for them, and the map it hands over names the voters
// (the caller adopts only a newer map, so an older one costs nothing).
func (h *Host) serveMetaMap(ctx context.Context) []byte {
	if h.MetaNode() == nil {
		if m := h.Map(); m.Epoch > 0 {
			return command.AppendBulkString(nil, m.Encode())
		}
		return command.Error("TRYAGAIN this node is not a member of the metadata group")
	}
	raw, err := h.readMetaKey(ctx, metaMapKey, false)
	if err != nil {
		return command.Error("TRYAGAIN " + err.Error())
	}
	if raw == nil {
		return []byte("$-1\r\n")
	}
	return command.AppendBulk(nil, raw)
}

// metaCAS replaces the replicated map old by next, and adopts next here.
// errMapChanged: another change came first (nothing done). While the group
// has no leader the write is repeated: a repeat of a write that was
// applied finds next in place, which is success too.
func (h *Host) metaCAS(ctx context.Context, old, next *ShardMap) error {
	oldEnc, nextEnc := old.Encode(), next.Encode()
	op := command.Cmd([]byte("eval"), []byte(metaCASScript), []byte("1"), []byte(metaMapKey), []byte(oldEnc), []byte(nextEnc))
	r, err := h.retry(ctx, func() []byte {
		meta := h.MetaNode()
		if meta == nil {
			return command.Error("ERR " + errNoMetaReplica.Error())
		}
		r, _ := meta.WriteIndexed(ctx, []command.Op{op})
		return r[0]
	})
	if err == nil && string(r) == ":1\r\n" {
		h.adopt(next)
		return nil
	}
	// Refused, or 0: either another change won, or this one was applied by
	// an earlier attempt whose reply was lost. The map says which.
	cur, rerr := h.readMeta(ctx, false)
	if rerr == nil && cur != nil && cur.Encode() == nextEnc {
		h.adopt(next)
		return nil
	}
	if err != nil {
		return fmt.Errorf("metadata group: %w", err)
	}
	return errMapChanged
}
