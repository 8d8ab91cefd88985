package cluster

// A process that holds no replica (docs/sharding.md, Adding a node): a
// node RAFT.SHARD ADDNODE recorded, started with the cluster's shard-map
// directive, which names it in no shard. It learns the replicated map from
// the metadata voters (fetchMap, at the client addresses the directive
// gives them), answers CLUSTER SLOTS/SHARDS/NODES and -MOVED from it, and
// starts a replica when the map names it a member (ADDREPLICA, rebalance
// --replicas: startNewShards). Its first replica becomes its home shard
// (keyless commands, ACL users, WAIT, +switch-master), whatever its id;
// until then keyless commands other than DBSIZE (0) are refused, and its
// internal calls authenticate with the process's own configuration, which
// every replica shares.

import (
	"context"

	"raftset/internal/command"
)

// replyNoReplica refuses a keyless command on a process that holds no
// replica yet: there is no state machine to run it in. Certainly not
// run, and answerable once a replica starts, so -TRYAGAIN.
var replyNoReplica = command.Error("TRYAGAIN this node holds no replica yet: keyless commands run once it holds one (RAFT.SHARD ADDREPLICA, raftset cluster rebalance --replicas)")

// setHome makes n, the first replica of a process started with none, its
// home shard, and hands it the front end's PUBLISH.
func (h *Host) setHome(n *Node) {
	// Stored before publish is read, as SetPublish stores publish before
	// it reads home: whichever runs second hands it over (twice is
	// harmless), so a PUBLISH set while the replica starts is not lost.
	h.home.Store(n)
	if p := h.publish.Load(); p != nil {
		n.SetPublish(*p)
	}
}

// call runs an internal call on another process's replica of shard (or
// the metadata group), authenticated as every replica here would be: the
// process's TLS and node secret, which need no replica.
func (h *Host) call(ctx context.Context, p *pool, addr string, shard uint32, args [][]byte) outcome {
	return callShard(ctx, p, h.cfg.peerAuth(), addr, shard, args)
}
