// Package resp is raftset's client front end: a Redis-protocol (RESP2) server
// with its own connection loop (loop.go: redcon's protocol, Conn and Writer,
// one copy per pipelined batch) that parses, authenticates and checks each command
// against the command table, answers connection commands itself, and hands
// data commands to a Store (the Raft node) in batches.
//
// # Path of a command
//
// A connection's goroutine reads every command already buffered on the socket
// (ReadPipeline) and walks them in order. Consecutive write commands
// become one Store.WriteIndexed call (group commit: the store merges the
// batches of all connections into one log entry). Consecutive reads become
// one Store.ReadBatch call (one consistency barrier for the run). A read never starts before the connection's
// earlier writes have been answered, and replies are written in the order the
// commands arrived. Errors found without state (unknown command, arity,
// NOAUTH, commands refused inside MULTI) never reach the store.
//
// # Framing limits
//
// A RESP reader (redcon's, and the loop's, which parses as it does) buffers
// whatever a client announces: a bulk length of 2^31 or a
// multibulk count of 10^9 makes it grow its buffer without bound (and a bulk
// length near 2^63 overflows its index arithmetic). Every accepted connection
// is therefore wrapped in a streaming RESP framing checker (framing.go) that
// sees the bytes before the reader does and refuses, as Redis does, bulk lengths
// above proto-max-bulk-len, multibulk counts above 1024*1024, inline lines
// above 64 KiB and, before authentication, counts above 10 and bulk lengths
// above 16 KiB. The refusal is written straight to the socket and the
// connection is closed.
//
// # Cluster mode (cluster.go)
//
// With Config.Mode "cluster" the front end checks, before a keyed command
// runs or is queued, that its keys share a hash slot (-CROSSSLOT) and that
// the store serves the slot here (SlotRouter; otherwise -MOVED), in Redis's
// order; EXEC checks its queued commands together.
//
// # Transactions
//
// MULTI queues commands; EXEC sends one command.OpTx through
// Store.WriteIndexed with the stamps that WATCH obtained from Store.Watch, so
// the state machine applies the transaction atomically and aborts it (*-1)
// when a watched key changed. Connection and node commands queued in a transaction are answered
// at EXEC time and travel in the transaction as pre-decided replies
// (command.OpReply), so their replies take their place in EXEC's array.
package resp
