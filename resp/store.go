package resp

import (
	"context"
	"time"

	"raftset/internal/acl"
	"raftset/internal/command"
)

// Store is what the front end needs from the replicated store. The cluster
// package implements it; resp only declares it.
//
// Calls come from many connections at once. The slices passed in (ops,
// cmds) are reused by the connection once the call returns; the arguments
// they hold are not, and may be kept.
type Store interface {
	// WriteIndexed proposes a connection's run of write commands through the
	// Raft log, batched with other clients' writes, and returns one complete
	// RESP2 reply per op, in order, once each is committed and applied (or an
	// error reply such as -TRYAGAIN / -CLUSTERDOWN for ops whose fate is
	// unknown or that were not proposed). It also returns a log index such
	// that a node that applied it applied these writes (0 when unknown); the
	// connection keeps the largest for WAIT. The store validates syntax and
	// rewrites relative times; resp only checks the command exists and its
	// arity.
	WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64)
	// ReadBatch runs a connection's run of consecutive read-only commands
	// (each args[0] is the name) and returns one reply per command, in order.
	// Unless stale, they are linearizable, and the whole run shares one
	// consistency barrier: all of its commands had arrived before the
	// barrier started, so one barrier makes every one of them linearizable.
	ReadBatch(ctx context.Context, cmds [][][]byte, stale bool) [][]byte
	// Wait answers WAIT numreplicas timeout (args as sent) for a connection
	// whose writes are covered by index (0: it wrote nothing yet).
	Wait(ctx context.Context, args [][]byte, index uint64) []byte
	// Watch returns the stamps WATCH records for keys (after a read barrier),
	// or an error reply.
	Watch(ctx context.Context, keys [][]byte) ([]command.Watch, []byte)
	// Admin runs node/cluster commands: SAVE, BGSAVE, LASTSAVE, DEBUG
	// (DIGEST, DIGEST-VALUE, RELOAD...), ROLE, CONFIG GET/SET of replicated or
	// raft parameters (set-max-*, snapshot-*), RAFT.* and SENTINEL.
	Admin(ctx context.Context, args [][]byte) []byte
	// Internal runs the internal raftset.* commands nodes send each other
	// (command.Internal), for connections that passed RAFTSET.AUTH; resp
	// answers RAFTSET.AUTH itself.
	Internal(ctx context.Context, args [][]byte) []byte
	// Info returns the INFO sections the store owns (memory, persistence,
	// replication, keyspace, raft), each as ordered "field:value" pairs.
	Info() []InfoSection
	// ClusterTime is the time the store's expiry decisions use (the
	// replicated cluster clock, not this machine's wall clock); TIME
	// answers it.
	ClusterTime() time.Time
	// Users returns the ACL users, which the store changes when it applies
	// ACL SETUSER, DELUSER and LOAD (writes: "acl load" carries the file's
	// name and contents). resp authenticates and checks commands against
	// them and sets the node-local requirepass overlay on them. nil: the
	// front end keeps users of its own, changed by nothing.
	Users() *acl.Registry
}

// InfoSection is one "# Name" block of INFO. Name is printed as given
// ("Replication") and matched case-insensitively against INFO's arguments.
type InfoSection struct {
	Name   string
	Fields [][2]string
}
