package command

// Decoder decodes entries into storage it reuses from one batch of entries to
// the next. A state machine applying a group-commit entry of a hundred SADDs
// would otherwise allocate a hundred Ops and a hundred argument slices (about
// 140 of the 700 bytes each SADD cost the heap in a profile of the 10M-SADD
// seed load), only to drop them once the entry is applied; fewer bytes
// allocated means fewer collections, so a lower GC target costs less CPU.
//
// The Ops, Tx.Ops and Args of every entry it returned stay valid until Reset;
// nothing may keep them past it (the argument bytes themselves alias the
// entry's data, as with Decode, and are not touched by Reset). The zero
// Decoder is ready to use; it is not safe for concurrent use.
type Decoder struct {
	ops  []Op
	args [][]byte
}

// Decode is the package's Decode, taking the entry's Ops and argument slices
// from the decoder's storage.
func (dc *Decoder) Decode(b []byte) (*Entry, error) {
	return decode(b, dc)
}

// Reset makes the storage reusable. It clears what the decoded entries
// pointed to, so that the storage does not keep their log data alive.
func (dc *Decoder) Reset() {
	clear(dc.ops)
	clear(dc.args)
	dc.ops, dc.args = dc.ops[:0], dc.args[:0]
}

// maxKeep bounds what a Decoder keeps between batches, in slice elements: an
// entry far larger than the usual group commit (a big MSET, a restore batch)
// is decoded into storage that is then dropped rather than held for good.
const maxKeep = 1 << 16

// opSlice returns an empty slice with room for n ops: from the decoder's
// storage, or allocated when dc is nil.
func (dc *Decoder) opSlice(n int) []Op {
	if dc == nil {
		return make([]Op, 0, n)
	}
	if len(dc.ops)+n > cap(dc.ops) {
		if n > maxKeep {
			return make([]Op, 0, n)
		}
		// The earlier entries keep the old array; only the new one is reused
		// after Reset.
		dc.ops = make([]Op, 0, min(max(2*cap(dc.ops), n, 64), maxKeep))
	}
	l := len(dc.ops)
	dc.ops = dc.ops[:l+n]
	return dc.ops[l : l : l+n]
}

// argSlice returns a slice of n arguments, like opSlice.
func (dc *Decoder) argSlice(n int) [][]byte {
	if dc == nil {
		return make([][]byte, n)
	}
	if len(dc.args)+n > cap(dc.args) {
		if n > maxKeep {
			return make([][]byte, n)
		}
		dc.args = make([][]byte, 0, min(max(2*cap(dc.args), n, 256), maxKeep))
	}
	l := len(dc.args)
	dc.args = dc.args[:l+n]
	return dc.args[l : l+n : l+n]
}
