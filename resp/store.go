package resp

import (
	"context"

	"raftset/internal/command"
)

// Store is what the front end needs from the replicated store. The cluster
// package implements it; resp only declares it.
//
// Calls come from many connections at once. The slices passed in (ops,
// cmds) are reused by the connection once the call returns; the arguments
// they hold are not, and may be kept.
type Store interface {
	// Write proposes write commands through the Raft log, batched with other
	// clients' writes, and returns one complete RESP2 reply per op, in order,
	// once each is committed and applied (or an error reply such as -TRYAGAIN /
	// -CLUSTERDOWN for ops whose fate is unknown or that were not proposed).
	// The store validates syntax and rewrites relative times; resp only checks
	// the command exists and its arity.
	Write(ctx context.Context, ops []command.Op) [][]byte
	// Read runs a read-only command (args[0] is the name). Unless stale, it is
	// linearizable: the store confirms leadership and waits for the applied index.
	Read(ctx context.Context, args [][]byte, stale bool) []byte
	// Watch returns the stamps WATCH records for keys (after a read barrier),
	// or an error reply.
	Watch(ctx context.Context, keys [][]byte) ([]command.Watch, []byte)
	// Admin runs node/cluster commands: INFO sections it owns, SAVE, BGSAVE, LASTSAVE,
	// DEBUG (DIGEST, DIGEST-VALUE, RELOAD...), ROLE, WAIT, CONFIG GET/SET of
	// replicated or raft parameters (set-max-*, snapshot-*), RAFT.*, SENTINEL and
	// the internal raftset.* commands nodes send each other.
	Admin(ctx context.Context, args [][]byte) []byte
	// Info returns the INFO sections the store owns (memory, persistence,
	// replication, keyspace, raft), each as ordered "field:value" pairs.
	Info() []InfoSection
}

// BatchReader is an optional Store extension. When the store implements it,
// a connection's run of consecutive pipelined read commands is served by one
// ReadBatch call instead of one Read per command, so that the whole run
// shares one consistency barrier (all of its commands had arrived before the
// barrier started, so one barrier makes every one of them linearizable).
// It returns one reply per command, in order.
type BatchReader interface {
	ReadBatch(ctx context.Context, cmds [][][]byte, stale bool) [][]byte
}

// Waiter is an optional Store extension that makes WAIT truthful. When the
// store implements it, writes go through WriteIndexed, which also returns a
// log index covering them; the connection keeps the largest, and WAIT asks
// Wait how many other nodes have applied that index.
type Waiter interface {
	WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64)
	// Wait answers WAIT numreplicas timeout (args as sent) for a connection
	// whose writes are covered by index (0: it wrote nothing yet).
	Wait(ctx context.Context, args [][]byte, index uint64) []byte
}

// InfoSection is one "# Name" block of INFO. Name is printed as given
// ("Replication") and matched case-insensitively against INFO's arguments.
type InfoSection struct {
	Name   string
	Fields [][2]string
}
