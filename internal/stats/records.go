package stats

import "time"

// Command is one command's counters (INFO commandstats); Hist is its
// latency histogram, valid only during the callback that receives it.
type Command struct {
	Name, Group             string
	Calls, Failed, Rejected uint64
	Hist                    *Snapshot
}

// Clients are the front end's connection counters.
type Clients struct {
	Connected, Received, Rejected, Commands int64
	// RecentMaxInput and RecentMaxOutput are the largest batch of input
	// and of replies of one connection in the last seconds.
	RecentMaxInput, RecentMaxOutput int64
}

// Follower is the leader's view of one other member.
type Follower struct {
	ID string
	// Applied is the member's applied index at its last answer.
	Applied uint64
	// LagEntries is how many entries the leader has applied that the
	// member had not at its last answer.
	LagEntries uint64
	// Lag is how long ago the leader had applied what the member has not:
	// 0 when it is caught up.
	Lag time.Duration
	// SinceContact is the time since its last answer (-1: never).
	SinceContact time.Duration
}

// Node is the state of one replica (one Raft group, one state machine) for
// the metrics endpoint.
type Node struct {
	// Shard is the group's shard id: 0 for the single group of a node
	// without shard-map, so that one dashboard serves both.
	Shard                              uint32
	State                              string // leader, follower, candidate, shutdown
	Term, CommitIndex, AppliedIndex    uint64
	LastLogIndex, LastSnapshotIndex    uint64
	LastSnapshotSize                   int64
	HasLeader                          bool
	LeaderChanges                      uint64
	Followers                          []Follower // on the leader
	EntriesProposed, OpsProposed       uint64
	ForwardedOps, ReadIndexRounds      uint64
	LinearizableReads, ExpiredProposed uint64
	Keys, KeysWithExpiry               uint64
	// ReadStallRefusals counts the read-index rounds refused because this
	// process had stalled (INFO raft_read_stall_refusals).
	ReadStallRefusals uint64
	// ReadStaleAcks counts the read-index rounds refused because a quorum
	// did not acknowledge requests sent after the round began (INFO
	// raft_read_stale_ack_refusals).
	ReadStaleAcks uint64
	// DatasetBytes is the state machine's accounting of its dataset (INFO
	// used_memory_dataset); EvictedKeys the keys evicted for maxmemory it
	// applied (INFO evicted_keys).
	DatasetBytes, EvictedKeys uint64
	// BatchOps is the histogram of ops per proposed entry (group commit).
	BatchOps *Snapshot
}

// Meta is a sharded process's view of the metadata group, the Raft group
// that replicates the cluster map.
type Meta struct {
	// Epoch is the configuration epoch of the newest cluster map this
	// process knows: 0 until it learned the bootstrapped map (epoch 1).
	Epoch uint64
	// Voter: this process is a voter of the group, in the configuration
	// its replica knows.
	Voter bool
	// Replica is the state of this process's replica of the group; nil
	// when it runs none.
	Replica *Node
	// BalanceTransfers and BalanceFailures count the leadership transfers
	// the automatic leader balancer of this process made and those that
	// failed (it acts only while this process's replica leads the group).
	BalanceTransfers, BalanceFailures uint64
}

// Process is what the metrics read of the process as a whole, whatever
// replicas it holds.
type Process struct {
	HeapBytes, RSSBytes uint64
}
