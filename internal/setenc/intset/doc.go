// Package intset is Redis's intset (redis/redis src/intset.c), byte for byte.
//
// A set whose members are all strict integers (package strictint) and that
// has at most set-max-intset-entries members is stored as one flat blob:
//
//	offset 0        4        8
//	       +--------+--------+----------+----------+-----+----------------+
//	       |encoding| length | value[0] | value[1] | ... | value[length-1]|
//	       | u32 LE | u32 LE | width B  | width B  |     |    width B     |
//	       +--------+--------+----------+----------+-----+----------------+
//
//	encoding = width in bytes: 2 (int16), 4 (int32) or 8 (int64)
//	values   = little-endian two's complement, strictly ascending
//
// Why Redis's format and not something of our own: RDB snapshots (ours and
// Redis's) embed this blob verbatim as a SET_INTSET record, so keeping the
// in-memory form identical makes saving a copy and loading a validation, and
// lets Redis load our snapshots and us load Redis's. It is also about as
// compact as a sorted integer set gets, which matters because memory per set
// must beat Redis's.
//
// The functions work on a plain []byte instead of a wrapper type so a caller
// can keep the blob itself as the set's value with no extra header. Functions
// that grow the blob return the (possibly moved) slice, like append.
//
// Width follows Redis exactly: it is the smallest width that fits every value
// ever added, so adding upgrades the whole array but removing never
// downgrades it. Copying that history-dependent choice is what makes our
// bytes equal Redis's for the same command sequence. Readers accept any
// legal width, since a blob need not have the minimal width for its contents.
//
// Accessors (Len, Get, Search, ...) trust their input and may panic on a
// malformed blob; anything from outside (snapshots, RESTORE payloads) must
// pass Validate first.
package intset
