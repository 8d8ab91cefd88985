// Package hashtable is the large-set encoding: a deterministic, compact hash
// set of byte strings.
//
// Redis's hashtable encoding keeps one dictEntry and one sds per member. We
// keep three flat arrays instead, so that a member costs little more than its
// own bytes and the garbage collector sees three pointers per set, not one per
// member:
//
//	arena  []byte    members back to back, each as <uvarint length><bytes>
//	dense  []uint32  dense[i] = arena offset of member i; the set's order
//	index  []uint32  open addressing with linear probing: 0 = free slot,
//	                 otherwise a dense position + 1
//
// The dense order is the only order anyone can observe (iteration, random
// picks, scans, snapshots). It depends on nothing but the sequence of Add and
// Remove calls: Add appends, Remove moves the last member into the hole. The
// index's hash seed differs per process, which is fine because the index only
// answers "where is this member" and never decides an order. So two replicas
// that applied the same operations, or one that rebuilt the table from a
// snapshot written in dense order, make the same random picks.
//
// Scans walk the dense array from the end towards position 0. A swap-remove
// only ever moves the last member to a lower position: the walk has either
// visited it already (it moves into unvisited territory and may be returned
// twice) or it is new or unvisited and moves to another unvisited slot. A
// member present for the whole scan is therefore returned at least once, as
// Redis guarantees, however the table grows or shrinks between calls.
package hashtable
