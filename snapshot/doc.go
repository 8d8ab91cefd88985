// Package snapshot reads and writes raftset's snapshots, which are Redis RDB
// files: a Redis 7.2 or later can load what we write, and we can restore from
// a dump.rdb that Redis wrote, for the types raftset holds (strings and sets).
// The package is the format only: io.Reader and io.Writer, no Raft, no
// logging, no clock except the ctime default.
//
// File layout (Redis's src/rdb.h and src/rdb.c; all numbers are Redis's,
// frozen in types.go):
//
//	+--------------------+
//	| "REDIS" "0011"     |  magic, 4-digit version (we write 11, or 10 for Redis 7.0)
//	+--------------------+
//	| FA key value       |  AUX: redis-ver, redis-bits, ctime, used-mem, aof-base,
//	| ...                |       raftset-ver, then the caller's (Raft index, term, ...)
//	+--------------------+
//	| FE db              |  SELECTDB, for each non-empty database in order
//	| FB keys expires    |  RESIZEDB sizing hint
//	| [FC ms:int64le]    |  EXPIRETIME_MS, for a key with a deadline
//	| type key value     |  0 string | 11 intset blob | 20 listpack blob |
//	| ...                |  2 hashtable: count, members in storage order
//	+--------------------+
//	| FF                 |  EOF
//	| crc:uint64le       |  CRC-64/Jones (init 0, no final xor) of every byte before it
//	+--------------------+
//
// Lengths are 1, 2, 5 or 9 bytes (big-endian beyond 6 bits); strings are a
// length and bytes, an INT8/16/32 (little-endian) for short integers, or LZF
// (compressed and original length, then the compressed bytes). Every string
// is written as Redis's rdbSaveRawString writes it, and with Compress our LZF
// is liblzf's, so a set blob is byte for byte what Redis would save.
//
// Reading accepts versions 1 to 12, checks the CRC when present, validates
// every intset and listpack deeply (size fields, entry encodings, order,
// duplicate members), rejects duplicate keys in a database, and reports
// corruption as an error matching ErrCorrupt with the byte offset. It never
// allocates on the word of a length field: long strings are read in 64 KiB
// chunks and LZF output is bounded by 88 times the compressed bytes read.
// Records of other types stop the read with an *UnsupportedTypeError, or are
// stepped over with ReaderOptions.SkipUnsupported.
//
// Load mode: a file that carries the AUX field raftset-ver (AuxRaftsetVer)
// is one of our own snapshots, and its sets are restored exactly as written
// (setenc.Exact: same encoding, same member order), so that a replica
// restored from a snapshot makes the same random picks as one that replayed
// the log. Any other file is loaded as a Redis 7.2 loads it (setenc.AsRedis):
// a listpack or intset over the limits becomes a hashtable, a small type-2
// set is rebuilt as an intset or listpack. See DESIGN.md for the
// compatibility policy.
package snapshot
