// Package command is the contract between raftset's front end, its Raft node
// and its state machine: the command table (name, arity, flags, key
// positions), the log-entry format that carries client writes through Raft,
// and the RESP2 reply encoders that every layer uses.
//
// A log entry is versioned and typed. A batch (group commit: one entry
// carries the writes of many clients) and a node's client address:
//
//	entry   := version:1 type:1 body
//	batch   := (type 0x01) nowMs:uvarint count:uvarint op*
//	node    := (type 0x82) len:uvarint id len:uvarint addr
//	slot    := (type 0x03) nowMs:uvarint action:1 first:uvarint last:uvarint epoch:uvarint len:uvarint batch
//	op      := 0x00 command | 0x01 tx | 0x02 reply
//	command := argc:uvarint (len:uvarint bytes)*
//	tx      := nwatch:uvarint (key exists:1 stamp:uvarint)* count:uvarint op*
//	reply   := len:uvarint bytes            (a reply decided before proposing)
//
// nowMs is the proposing leader's clock: the only clock the state machine
// reads. The version byte is 1 for batch and node entries, 2 for slot
// entries and 3 for a slot entry of action 6 (SlotAbort, which a version-2
// binary does not know) (Entry.Version): a binary reads every version up to
// Version, and an older binary stops at an entry of a later version with a
// clear "newer raftset" error instead of skipping a change of ownership. A type byte with the 0x80 bit set (IgnoreIfUnknown) marks an entry
// that an older binary may skip; any other unknown type, and a version above
// Version, is a decode error (DecodeError says which), on which the state
// machine stops.
//
// Replies are RESP2 wire bytes. raftset answers HELLO 3 with -NOPROTO, so
// every reply has exactly one form, and a follower relays the leader's reply
// bytes unchanged.
package command
