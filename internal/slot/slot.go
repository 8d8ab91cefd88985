package slot

import "bytes"

// Count is the number of hash slots, fixed by the Redis Cluster protocol.
const Count = 16384

// Of returns key's hash slot. When the key holds a non-empty hash tag (the
// bytes between the first '{' and the first '}' after it), only the tag is
// hashed, so that "{user1}.a" and "{user1}.b" share a slot; "{}" and an
// unclosed '{' hash the whole key, as Redis does.
func Of(key []byte) int {
	if s := bytes.IndexByte(key, '{'); s >= 0 {
		if e := bytes.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) & (Count - 1))
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection), the checksum Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ table[byte(crc>>8)^c]
	}
	return crc
}

var table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// Ranges returns the slots of set (a predicate over 0..Count-1) as sorted
// inclusive [first, last] ranges, the form CLUSTER SLOTS, SHARDS and NODES
// report.
func Ranges(set func(int) bool) [][2]int {
	var out [][2]int
	for s := 0; s < Count; s++ {
		if !set(s) {
			continue
		}
		e := s
		for e+1 < Count && set(e+1) {
			e++
		}
		out = append(out, [2]int{s, e})
		s = e
	}
	return out
}
