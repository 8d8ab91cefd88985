// Package setenc is the set value of raftset: one type, Set, that callers use
// without knowing how it is stored, and that stores itself exactly as Redis 7.2
// does.
//
// A Set is an intset (all members strict integers, at most
// set-max-intset-entries of them), a listpack (at most
// set-max-listpack-entries members of at most set-max-listpack-value bytes) or
// a hashtable. The intset and listpack bytes are Redis's own (packages intset
// and listpack), because snapshots are RDB files that embed them verbatim.
// Conversions follow src/t_set.c rule for rule and only go upwards
// (intset→listpack→hashtable, intset→hashtable); removing members never
// converts. The few places where Redis rebuilds a set (the *STORE commands,
// SPOP with a large count, loading an RDB) have their own constructors here.
//
// Everything a write can do is a pure function of the operations and the
// random Source the caller passes: there is no clock, no global random source
// and no map iteration. Two replicas that apply the same operations with the
// same seeds hold byte-identical sets and pick the same random members, and so
// does a replica that loaded the set from a snapshot (see Load).
package setenc
