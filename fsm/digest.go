package fsm

import (
	"crypto/sha1"
)

// DEBUG DIGEST exactly as Redis computes it (redis/redis src/debug.c
// computeDatasetDigest and xorObjectDigest), so our digests equal Redis's for
// the same data:
//
//	xorDigest(d, p):  d ^= SHA1(p)                  (order-independent)
//	mixDigest(d, p):  d = SHA1(d ^ SHA1(p))         (order-dependent)
//
//	per key:   k = 0; mix(k, key); mix(k, be32(type)); value; expiry
//	           string: mix(k, value)   set: xor(k, member) for each member
//	           a key with a deadline: xor(k, "!!expire!!") (not the time)
//	dataset:   0 if empty; else D = 0; mix(D, be32(db)); D ^= k for each key
//
// Types are Redis's OBJ_STRING = 0 and OBJ_SET = 2. Logically expired keys
// are included, as in Redis. Node addresses (nodes.go) are not data and are
// left out, so the digest stays comparable with Redis's.

const (
	objString = 0
	objSet    = 2
)

func xorDigest(d *[20]byte, p []byte) {
	h := sha1.Sum(p)
	for i := range d {
		d[i] ^= h[i]
	}
}

func mixDigest(d *[20]byte, p []byte) {
	xorDigest(d, p)
	*d = sha1.Sum(d[:])
}

// digest is DEBUG DIGEST of database 0.
func (ks *keyspace) digest() [20]byte {
	var final [20]byte
	if ks.Len() == 0 {
		return final
	}
	mixDigest(&final, []byte{0, 0, 0, 0}) // htonl(db 0)
	for pos := range ks.Len() {
		var d [20]byte
		mixDigest(&d, ks.keys.At(pos))
		d = ks.objectDigest(pos, d)
		xorDigest(&final, d[:])
	}
	return final
}

// valueDigest is DEBUG DIGEST-VALUE of the key at pos.
func (ks *keyspace) valueDigest(pos int) [20]byte { return ks.objectDigest(pos, [20]byte{}) }

// objectDigest is xorObjectDigest: it continues mixing from d.
func (ks *keyspace) objectDigest(pos int, d [20]byte) [20]byte {
	typ := byte(objString)
	if ks.isSet(pos) {
		typ = objSet
	}
	mixDigest(&d, []byte{0, 0, 0, typ})
	if typ == objString {
		mixDigest(&d, ks.str(pos))
	} else {
		ks.set(pos).Iterate(func(m []byte) bool { xorDigest(&d, m); return true })
	}
	if ks.exp(pos) != noExpiry {
		xorDigest(&d, []byte("!!expire!!"))
	}
	return d
}
