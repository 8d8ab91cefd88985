// Package fsm is raftset's replicated state machine: the keyspace, the
// semantics of every data command (Redis 7.2's replies and errors), and
// Raft's Apply, Snapshot and Restore.
//
// # The raft.FSM contract
//
// Apply (and ApplyBatch, for raft.BatchingFSM) runs committed entries in log
// order under the state lock and returns an *ApplyResult holding one RESP2
// reply per op of the entry; an entry that does not decode (written by a
// newer raftset, or corrupt) halts the state machine: it applies nothing
// more, refuses snapshots and closes Halted, since skipping the entry would
// let replicas diverge and panicking would only repeat on restart. TypeNode
// entries record node client addresses (nodes.go); TypeSlot entries are the
// steps of a hash slot migration (slots.go, docs/sharding.md), which also
// refuse, at apply, commands on slots this shard does not serve. Snapshot runs on the
// same goroutine as Apply and only captures (see below); Persist writes the
// file while Apply goes on; Raft always calls Release. Restore reads the
// whole file into a new keyspace and swaps it in only once the file has
// proved complete and intact; on any error the previous state is kept.
//
// # Determinism (docs/invariants.md §3)
//
// Apply reads nothing but the entry and the state. Its clock is
// now = max(previous now, entry.NowMs), the proposing leader's cluster
// clock, so it never runs backwards across leader changes; the cluster
// clock continues from it (cluster/clock.go), so it does not jump ahead
// with a leader whose wall clock does. Every random choice (SPOP,
// and SRANDMEMBER or RANDOMKEY inside a transaction) comes from a PCG seeded
// with the entry's index and term and the command's position in the entry,
// over member and key orders that are themselves replicated state: the
// keyspace keeps keys in the dense order of a hashtable.Table, sets keep
// theirs (package setenc), and a snapshot writes both in that order, so a
// replica restored from it draws exactly what a replica that replayed the
// log draws. No Go map is iterated where it could decide a reply or the
// state. The set-max-* limits are replicated ("config set" entries) and
// travel in snapshots. DEBUG DIGEST is Redis's own digest, so replicas (and
// Redis itself) can be compared.
//
// # Leader-side preparation and reads
//
// Prepare runs on the leader before proposing a write: it turns syntax,
// option and range errors into OpReply ops (never proposed as commands) and
// relative times into absolute ones (EXPIRE → PEXPIREAT, SET EX → SET PXAT,
// SETEX → SET PXAT, GETEX EX → GETEX PXAT), as Redis rewrites them for its
// replicas. Apply accepts the original forms too and reads relative times
// against its own clock. Read serves read-only commands under the read lock;
// WatchStamp gives WATCH its stamps, which EXEC compares when applied.
//
// # Expiry (docs/invariants.md §4)
//
// A key is logically expired when its deadline is at or before the clock.
// Reads hide such keys; a write applied from the log treats one as absent
// and deletes it as part of the write. Reclaiming the rest is the leader's
// job: ExpiredKeys samples due keys and the leader proposes
// "raftset.expire key..." for them, which deletes each key only if it is
// still expired at that entry's time. The deadline sits in the same chunk
// as the value, found by the same lookup.
//
// # Snapshots (docs/invariants.md §6)
//
// A snapshot is an RDB file (package snapshot) that Redis 7.2 can load,
// plus AUX fields carrying what Redis has no place for: the clock, the
// limits, the last-delete index and each key's version (the WATCH stamps),
// the caller's fields (SetSnapshotAux, RestoredAux) and the node addresses. Capture copies the
// key bytes and the pointers to the keyspace's chunks; the live keyspace
// copies a chunk before writing to it and a set before changing it in place
// while a snapshot may still read them (copy-on-write), so Apply never
// waits for Persist.
//
// The unusual memory layout (values in fixed chunks, strings stored in a
// setenc.Set-shaped cell) exists for the memory target of the seed dataset:
// see keyspace.go and cells.go.
package fsm
