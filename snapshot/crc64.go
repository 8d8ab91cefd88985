package snapshot

import "encoding/binary"

// crcPoly is CRC-64/Jones in reflected form (src/crc64.c). Redis starts from 0
// and applies no final XOR; hash/crc64 inverts before and after, so
// crc64.Checksum gives a different value for the same table ("123456789"
// gives 0x3558e8e979f60d7e, not Redis's 0xe9c6d914c4b8d9ca). We keep our own slicing-by-8 loop instead of ^crc64.Update(^prev...):
// hash/crc64 rebuilds its 16 KiB slicing table on every call for a custom
// polynomial, and the reader updates the CRC in many small pieces.
const crcPoly = 0x95AC9329AC4BC9B5

var crcTab = makeCRCTable()

func makeCRCTable() *[8][256]uint64 {
	t := new([8][256]uint64)
	for i := range 256 {
		c := uint64(i)
		for range 8 {
			if c&1 == 1 {
				c = c>>1 ^ crcPoly
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xFF] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}

// crc64Update continues Redis's crc64(crc, p): crc64Update(0, all bytes) is
// the RDB trailer value, and updates compose.
func crc64Update(crc uint64, p []byte) uint64 {
	t := crcTab
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint64(p)
		crc = t[7][crc&0xFF] ^ t[6][crc>>8&0xFF] ^ t[5][crc>>16&0xFF] ^ t[4][crc>>24&0xFF] ^
			t[3][crc>>32&0xFF] ^ t[2][crc>>40&0xFF] ^ t[1][crc>>48&0xFF] ^ t[0][crc>>56]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
}
