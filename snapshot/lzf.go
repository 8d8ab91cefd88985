package snapshot

import "errors"

// LZF as liblzf 3.6 implements it in Redis's tree (src/lzf_c.c, src/lzf_d.c,
// built with HLOG 16, VERY_FAST, and LZF_USE_OFFSETS 0). The compressor is a line-by-line port so
// that a blob we compress is the blob Redis would write: the same matches,
// the same output budget, the same give-up points. Compressed format:
//
//	000LLLLL <L+1 bytes>            literal run of L+1 bytes
//	LLLooooo oooooooo               back-reference: copy L+2 bytes from offset o+1 back (L < 7)
//	111ooooo LLLLLLLL oooooooo      back-reference: copy L+9 bytes from offset o+1 back
const (
	lzfHLog   = 16
	lzfHSize  = 1 << lzfHLog
	lzfMaxLit = 1 << 5
	lzfMaxOff = 1 << 13
	lzfMaxRef = 1<<8 + 1<<3
)

// lzfCompressor holds liblzf's hash table between calls. liblzf keeps it on
// the stack, uninitialised, and relies on its range checks to ignore stale
// slots; we get the same effect without clearing 256 KiB per call by storing
// base+pos+1 and treating every value at or below the current base as empty.
type lzfCompressor struct {
	tab  []uint32
	base uint32
}

func lzfIdx(h uint32) uint32 { return ((h >> (3*8 - lzfHLog)) - h*5) & (lzfHSize - 1) }

// compress writes the LZF form of in into out and returns its length, or 0
// when it does not fit in len(out) bytes (liblzf's contract: the caller
// passes the budget it is willing to spend and keeps in uncompressed on 0).
func (c *lzfCompressor) compress(in, out []byte) int {
	inLen, outLen := len(in), len(out)
	if inLen == 0 || outLen == 0 {
		return 0
	}
	if c.tab == nil {
		c.tab = make([]uint32, lzfHSize)
	}
	if uint64(c.base)+uint64(inLen)+1 >= 1<<32 {
		clear(c.tab)
		c.base = 0
	}
	base := c.base
	c.base += uint32(inLen) + 1
	tab := c.tab[:lzfHSize]

	ip, op, lit := 0, 1, 0 // op 1: room for the first run's control byte
	var hval uint32
	if inLen >= 2 {
		hval = uint32(in[0])<<8 | uint32(in[1])
	}
	for ip < inLen-2 {
		hval = hval<<8 | uint32(in[ip+2])
		slot := lzfIdx(hval)
		v := tab[slot]
		tab[slot] = base + uint32(ip) + 1
		ref := int(v) - int(base) - 1 // < 0: empty or stale slot
		if v > base && ip-ref-1 < lzfMaxOff && ref > 0 &&
			in[ref] == in[ip] && in[ref+1] == in[ip+1] && in[ref+2] == in[ip+2] {
			off := ip - ref - 1
			n := 2
			maxlen := min(inLen-ip-n, lzfMaxRef)
			out[op-lit-1] = byte(lit - 1) // stop run
			if lit == 0 {
				op-- // undo the empty run
			}
			if op+3+1 >= outLen {
				return 0
			}
			// liblzf checks 16 bytes unrolled before its bounded loop, and the
			// unrolled part ignores maxlen; keep that, it decides match lengths.
			mismatch := false
			if maxlen > 16 {
				for range 16 {
					n++
					if in[ref+n] != in[ip+n] {
						mismatch = true
						break
					}
				}
			}
			if !mismatch {
				for {
					n++
					if n >= maxlen || in[ref+n] != in[ip+n] {
						break
					}
				}
			}
			n -= 2
			ip++
			if n < 7 {
				out[op] = byte(off>>8 + n<<5)
				op++
			} else {
				out[op] = byte(off>>8 + 7<<5)
				out[op+1] = byte(n - 7)
				op += 2
			}
			out[op] = byte(off)
			op++
			lit = 0
			op++ // start run
			ip += n + 1
			if ip >= inLen-2 {
				break
			}
			// VERY_FAST: hash only the two positions before the new ip.
			ip -= 2
			hval = uint32(in[ip])<<8 | uint32(in[ip+1])
			hval = hval<<8 | uint32(in[ip+2])
			tab[lzfIdx(hval)] = base + uint32(ip) + 1
			ip++
			hval = hval<<8 | uint32(in[ip+2])
			tab[lzfIdx(hval)] = base + uint32(ip) + 1
			ip++
		} else {
			if op >= outLen {
				return 0
			}
			lit++
			out[op] = in[ip]
			op++
			ip++
			if lit == lzfMaxLit {
				out[op-lit-1] = byte(lit - 1)
				lit = 0
				op++
			}
		}
	}
	if op+3 > outLen { // at most 3 bytes can be missing here
		return 0
	}
	for ip < inLen {
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == lzfMaxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	out[op-lit-1] = byte(lit - 1) // end run
	if lit == 0 {
		op--
	}
	return op
}

var (
	errLZFOverrun  = errors.New("LZF data decodes past the original length")
	errLZFInput    = errors.New("LZF data ends inside an instruction")
	errLZFBackref  = errors.New("LZF back-reference before the start of the output")
	errLZFUnderrun = errors.New("LZF data decodes short of the original length")
)

// lzfDecompress decodes in into out, which must be exactly the original
// length. Unlike liblzf it rejects a short result itself, as Redis's caller
// does (rdbLoadLzfStringObject).
func lzfDecompress(in, out []byte) error {
	ip, op := 0, 0
	for ip < len(in) {
		ctrl := int(in[ip])
		ip++
		if ctrl < 1<<5 {
			n := ctrl + 1
			if op+n > len(out) {
				return errLZFOverrun
			}
			if ip+n > len(in) {
				return errLZFInput
			}
			copy(out[op:op+n], in[ip:ip+n])
			op += n
			ip += n
			continue
		}
		n := ctrl >> 5
		if n == 7 {
			if ip >= len(in) {
				return errLZFInput
			}
			n += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return errLZFInput
		}
		ref := op - (ctrl&0x1F)<<8 - int(in[ip]) - 1
		ip++
		n += 2
		if op+n > len(out) {
			return errLZFOverrun
		}
		if ref < 0 {
			return errLZFBackref
		}
		if op-ref >= n {
			copy(out[op:op+n], out[ref:ref+n])
		} else {
			// Overlapping: the copy reads bytes it has just written.
			for i := range n {
				out[op+i] = out[ref+i]
			}
		}
		op += n
	}
	if op != len(out) {
		return errLZFUnderrun
	}
	return nil
}

// lzfMaxRatio bounds original_len by the compressed length: the densest
// instruction, a long back-reference, turns 3 bytes into 7+255+2 = 264. A
// claimed size beyond that is corrupt, so the reader never allocates more than
// 88 bytes per compressed byte it has actually read.
const lzfMaxRatio = (7 + 255 + 2) / 3
