package fsm

import (
	"fmt"
	"reflect"
	"unsafe"

	"raftset/internal/setenc"
	"raftset/internal/strictint"
)

// Values live in one dense array of setenc.Set (16 bytes each: setenc made
// its Set a value of exactly that size so that a keyspace can hold sets
// without a pointer and an object per key). A string key's cell holds the
// string instead, as a strCell: the []byte's pointer, length and capacity,
// the same shape as a Set. The kinds array says which a cell holds; a cell
// is only ever read as what it holds.
//
// Keeping strings in the same array is what keeps them "inline": a second
// array of []byte would cost every key 24 more bytes, and the seed dataset's
// memory target (840 bytes per key) leaves no room for that.
//
// The GC sees the cell as a Set, whose first word is an unsafe.Pointer, so
// it keeps a string's bytes alive exactly as a Set's blob. checkCellLayout
// verifies that shape (a pointer, then two uint32s, 16 bytes), and New
// panics if setenc.Set ever changes it.
type strCell struct {
	p    unsafe.Pointer
	n, c uint32
}

// checkCellLayout reports whether a strCell can live in a setenc.Set cell.
func checkCellLayout() error {
	set, cell := reflect.TypeFor[setenc.Set](), reflect.TypeFor[strCell]()
	ok := set.Size() == cell.Size() && set.NumField() == cell.NumField()
	for i := 0; ok && i < set.NumField(); i++ {
		s, c := set.Field(i), cell.Field(i)
		ok = s.Offset == c.Offset && s.Type.Kind() == c.Type.Kind() && s.Type.Size() == c.Type.Size()
	}
	if !ok {
		return fmt.Errorf("fsm: setenc.Set (%d bytes) no longer has the shape of fsm's string cell "+
			"(unsafe.Pointer, uint32, uint32); update fsm/cells.go", set.Size())
	}
	return nil
}

// maxStringBytes is the longest string a cell holds.
const maxStringBytes = 1<<32 - 1

func cellOf(s *setenc.Set) *strCell { return (*strCell)(unsafe.Pointer(s)) }

func putStringCell(s *setenc.Set, b []byte) {
	b = b[:len(b):min(cap(b), maxStringBytes)]
	*cellOf(s) = strCell{p: unsafe.Pointer(unsafe.SliceData(b)), n: uint32(len(b)), c: uint32(cap(b))}
}

func stringCell(s *setenc.Set) []byte {
	c := cellOf(s)
	if c.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(c.p), c.c)[:c.n:c.n]
}

// An integer string (kind strInt) keeps its int64 in the cell's two
// uint32s with a nil pointer: no bytes anywhere, as Redis's int encoding
// keeps the value in the object's pointer field.
func putIntCell(s *setenc.Set, v int64) {
	*cellOf(s) = strCell{n: uint32(uint64(v)), c: uint32(uint64(v) >> 32)}
}

func intCell(s *setenc.Set) int64 {
	c := cellOf(s)
	return int64(uint64(c.n) | uint64(c.c)<<32)
}

// embstrMax is the longest string Redis stores embstr (OBJ_ENCODING_EMBSTR_SIZE_LIMIT).
const embstrMax = 44

// storeString puts b in the cell as enc says and returns the cell's kind.
func storeString(s *setenc.Set, b []byte, enc strEnc) uint8 {
	if enc == encContent {
		if v, ok := contentInt(b); ok {
			putIntCell(s, v)
			return kindString | strInt
		}
	}
	if b == nil {
		b = []byte{}
	}
	putStringCell(s, b)
	if enc == encRaw {
		return kindString | strRaw
	}
	return kindString
}

// contentInt is tryObjectEncoding's test: a strict integer of at most 20
// characters that fits an int64.
func contentInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > strictint.MaxLen {
		return 0, false
	}
	return strictint.Parse(b)
}
