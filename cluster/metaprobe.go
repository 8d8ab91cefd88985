package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
)

// Before bootstrapping (docs/sharding.md, The metadata group: a second
// group by bootstrap). A member of the directive's first shard whose
// dir/meta is empty bootstraps the metadata group from the directive. A
// voter that lost its disk, or a replacement started under an old id, would
// do so beside the live group: two such replicas together are a majority
// of the directive's configuration and elect a leader of their own, with a
// map of their own. So before bootstrapping the process asks every other
// process whose client address it knows (raftset.metaprobe <self>) what
// it knows of the group, and does not bootstrap once any of them has a map:
//
//   - the map's voters do not include this node: it starts no replica (the
//     map refresh starts one if ADDMETA adds it);
//   - a replica of the group counts this node a member of its configuration
//     and holds the address this node's replica published in the group's
//     log: this node's replica held the group's state and lost it; NewHost
//     refuses to start (errMetaStateLost says what to do);
//   - else (the group was formed without this node, a late starter of a
//     fresh cluster, or after raftset recover --meta left it out): its
//     replica starts without a configuration, which never campaigns, and
//     waits for the group's leader to send it the log;
//   - no replica of the group answered (only processes outside it): it
//     cannot tell, and refuses to start until one answers.
//
// A fresh cluster is unchanged: nobody has a map until a leader elected by
// bootstrapped replicas wrote one, so every member that starts before that
// bootstraps, with the same configuration, one group.
const (
	cmdMetaProbe = "raftset.metaprobe"
	// metaProbeWait bounds the probe at start: peers are asked at once,
	// and one that does not answer within it is not waited for.
	metaProbeWait = 2 * time.Second
)

// metaProbe is one process's answer to raftset.metaprobe <id>.
type metaProbe struct {
	from string
	m    *ShardMap // the newest map it knows, nil if none
	// replica: it runs a replica of the group with a configuration;
	// member: id is in that configuration; seen: the replica's state holds
	// id's published client address (id's replica once followed a leader).
	replica, member, seen bool
}

// serveMetaProbe answers raftset.metaprobe <id>: [map or nil, replica,
// member, seen], read from this process's state with no barrier (a stale
// answer errs only towards an older map, still a map).
func (h *Host) serveMetaProbe(ctx context.Context, args [][]byte) []byte {
	if len(args) != 2 {
		return command.Error(command.ErrArity(cmdMetaProbe))
	}
	id := string(args[1])
	var m *ShardMap
	if cur := h.Map(); cur.Epoch > 0 {
		m = cur
	}
	var p metaProbe
	if meta := h.MetaNode(); meta != nil {
		if rm, err := h.readMeta(ctx, true); err == nil && rm != nil && (m == nil || rm.Epoch > m.Epoch) {
			m = rm
		}
		if _, all, err := h.metaConfig(); err == nil && len(all) > 0 {
			p.replica = true
			_, p.member = all[id]
			p.seen = meta.ClientAddr(id) != ""
		}
	}
	out := command.AppendArray(nil, 4)
	if m != nil {
		out = command.AppendBulkString(out, m.Encode())
	} else {
		out = append(out, command.NullBulk...)
	}
	for _, b := range []bool{p.replica, p.member, p.seen} {
		out = command.AppendInt(out, boolInt(b))
	}
	return out
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// parseMetaProbe reads serveMetaProbe's reply; false for anything else (an
// older release's error, a map that does not decode).
func parseMetaProbe(from string, raw []byte) (metaProbe, bool) {
	r, err := respwire.Parse(raw)
	if err != nil || r.Kind != '*' || len(r.Elems) != 4 {
		return metaProbe{}, false
	}
	p := metaProbe{from: from}
	if e := r.Elems[0]; !e.Null {
		if e.Kind != '$' {
			return metaProbe{}, false
		}
		if p.m, err = DecodeShardMap(e.Str); err != nil {
			return metaProbe{}, false
		}
	}
	p.replica, p.member, p.seen = r.Elems[1].Str == "1", r.Elems[2].Str == "1", r.Elems[3].Str == "1"
	return p, true
}

// probeAddrs are the client addresses of every other process this one
// knows at start, before its shards' replicas run: the directive's @addr
// and node records.
func (h *Host) probeAddrs() map[string]string {
	var ids []string
	for _, sh := range h.bootstrap.Shards {
		ids = append(ids, sh.Members...)
	}
	for id := range h.raftAddr {
		ids = append(ids, id)
	}
	for id := range h.bootstrap.Nodes {
		ids = append(ids, id)
	}
	addrs := map[string]string{}
	asked := map[string]bool{} // ids and addresses
	for _, id := range ids {
		if id == h.self || asked[id] {
			continue
		}
		asked[id] = true
		a := h.bootstrap.Addrs[id]
		if r, ok := h.bootstrap.Nodes[id]; ok && a == "" {
			a = r.Client
		}
		if a != "" && !asked[a] {
			asked[a] = true
			addrs[id] = a
		}
	}
	return addrs
}

// probeMeta asks every process probeAddrs knows at once, for at most
// metaProbeWait, and returns the answers.
func (h *Host) probeMeta() []metaProbe {
	ctx, cancel := context.WithTimeout(context.Background(), metaProbeWait)
	defer cancel()
	var (
		mu  sync.Mutex
		out []metaProbe
		wg  sync.WaitGroup
	)
	for id, addr := range h.probeAddrs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := h.call(ctx, &h.pool, addr, MetaGroup, [][]byte{[]byte(cmdMetaProbe), []byte(h.self)})
			if o.kind != applied {
				return
			}
			if p, ok := parseMetaProbe(id, o.reply); ok {
				mu.Lock()
				out = append(out, p)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b metaProbe) int { return strings.Compare(a.from, b.from) })
	return out
}

// errMetaStateLost: this node's replica held the metadata group's state,
// which its directory no longer has.
var errMetaStateLost = errors.New("the metadata group exists and counts this node a voter that held its state, which dir/meta no longer has")

// metaStart decides, from the answers of a probe, how a member of the
// directive's first shard with an empty dir/meta starts its replica
// (above): bootstrap, start (joining), or neither; an error refuses the
// start.
func (h *Host) metaStart(answers []metaProbe) (start, bootstrap bool, err error) {
	var newest *metaProbe
	for i, a := range answers {
		if a.m != nil && (newest == nil || a.m.Epoch > newest.m.Epoch) {
			newest = &answers[i]
		}
	}
	if newest == nil {
		return true, true, nil
	}
	if !slices.Contains(h.metaVotersIn(newest.m), h.self) {
		return false, false, nil
	}
	replicas := 0
	for _, a := range answers {
		if !a.replica {
			continue
		}
		replicas++
		if a.member && a.seen {
			return false, false, fmt.Errorf("cluster: metadata group: %w (node %s's replica says so; %s answered the map at epoch %d): "+
				"bootstrapping here would form a second group. Start this process under a new node id "+
				"(raftset cluster add-node, then add-meta) and remove-meta %s; or, if the group lost its majority, "+
				"run raftset recover --meta on a surviving voter (docs/operations.md)",
				errMetaStateLost, a.from, newest.from, newest.m.Epoch, h.self)
		}
	}
	if replicas == 0 {
		return false, false, fmt.Errorf("cluster: metadata group: %s answered the map at epoch %d, which names node %s a voter, "+
			"but no replica of the group answered whether this node's replica ever held its state (dir/meta is empty): "+
			"start it again once a metadata voter (%s) answers", newest.from, newest.m.Epoch, h.self,
			strings.Join(h.metaVotersIn(newest.m), ","))
	}
	return true, false, nil
}
