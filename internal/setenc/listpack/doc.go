// Package listpack reads and writes Redis's listpack, byte for byte as Redis
// 7.2 lays it out for small set values (OBJECT ENCODING "listpack").
//
// Why Redis's exact bytes: RDB snapshots (ours and Redis's, record type 20)
// embed the listpack blob verbatim, so a blob written here must load in
// Redis and a blob written by Redis must load here without re-encoding. And
// memory: a 50-member set of 12-byte members is one 707-byte slice, about
// 14 bytes per member, instead of a map with per-member string headers.
//
// Layout (all multi-byte header and integer fields little-endian):
//
//	+-------------+-----------+---------------------------+------+
//	| total_bytes | num_elems | entry entry ... entry     | 0xFF |
//	|   u32 LE    |  u16 LE   |                           |      |
//	+-------------+-----------+---------------------------+------+
//	 0             4           6 (HeaderSize)              len-1
//
//	entry := encoding+data (L bytes) backlen (1..5 bytes, encodes L)
//
//	first byte   meaning                          encoding+data
//	0xxxxxxx     uint 0..127                      1
//	10LLLLLL     string, len 0..63                1+len
//	110vvvvv v   int13 -4096..4095 (high byte 1st) 2
//	1110LLLL L   string, len 0..4095 (high 1st)    2+len
//	F0 len:u32   string                           5+len
//	F1/F2/F3/F4  int16/int24/int32/int64 LE       3/4/5/9
//	F5..FE       invalid;  FF  terminator
//
// backlen stores L in 7-bit groups, most significant first; the last byte
// has bit 7 set unless it is the only byte, so it can be decoded from its
// end going left. Its size follows Redis's lpEncodeBacklen exactly:
// 1 byte for L <= 127, 2 for L < 16383, 3 for L < 2097151, 4 for
// L < 268435455, else 5 (note the "<": L = 16383 takes 3 bytes).
//
// num_elems is the entry count, or 65535 meaning "unknown, walk to count";
// writers saturate at 65535 as Redis does.
//
// A writer picks the encoding Redis picks: a member that passes Redis's
// strict integer rule (package strictint) becomes the smallest integer
// entry; anything else a 6-, 12- or 32-bit string entry by length. Readers
// accept any valid encoding, and Find compares string entries by bytes and
// integer entries by value, like Redis's lpFind.
//
// The package works on plain []byte; positions are byte offsets of entries
// in the blob. Functions that change a blob return it, possibly moved; they
// grow it with alloc.Grow (to the allocator's size class, never append's
// geometric slack). Readers assume a blob that passed Validate(b, true) or
// was built by this package; Validate and ValidateSet are the only functions
// meant for untrusted bytes.
package listpack
