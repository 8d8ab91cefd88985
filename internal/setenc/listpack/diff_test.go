package listpack

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

var boundaryInts = []int64{
	0, 1, 127, 128, -1, -4096, 4095, 4096, -4097, 32767, 32768, -32768, -32769,
	8388607, 8388608, -8388608, -8388609, math.MaxInt32, math.MaxInt32 + 1,
	math.MinInt32, math.MinInt32 - 1, math.MaxInt64, math.MinInt64,
}

// genMember returns a member of a random kind: integers of every width,
// integer-looking strings that are not integers, short binary strings
// (NUL, 0xFF, digits and '-' included), 12-byte strings, strings around the
// 63/64 and 4095/4096 length boundaries and, rarely, around the L = 16383
// backlen boundary.
func genMember(r *rand.Rand) []byte {
	switch k := r.IntN(1000); {
	case k < 200:
		return strconv.AppendInt(nil, int64(r.IntN(600))-300, 10)
	case k < 260:
		v := boundaryInts[r.IntN(len(boundaryInts))]
		if v != math.MaxInt64 && v != math.MinInt64 {
			v += int64(r.IntN(3)) - 1
		}
		return strconv.AppendInt(nil, v, 10)
	case k < 320:
		return strconv.AppendInt(nil, int64(r.Uint64()), 10)
	case k < 360:
		odd := []string{"01", "-0", "+5", "007", " 1", "1 ", "1.0", "-", "", "18446744073709551616", "9223372036854775808", "00"}
		return []byte(odd[r.IntN(len(odd))])
	case k < 650:
		alphabet := []byte{0, 0xFF, '0', '1', '9', '-', 'a', 'z', 0x80, 0xC0, 0xF0, 0xF5}
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return b
	case k < 850:
		return twelveByte(r)
	case k < 950:
		b := make([]byte, 60+r.IntN(10))
		fillRandom(r, b)
		return b
	case k < 998:
		b := make([]byte, 120+r.IntN(20))
		fillRandom(r, b)
		return b
	case k < 999:
		b := make([]byte, 4093+r.IntN(6))
		fillRandom(r, b)
		return b
	default:
		b := make([]byte, 16376+r.IntN(4))
		fillRandom(r, b)
		return b
	}
}

func fillRandom(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func twelveByte(r *rand.Rand) []byte {
	return []byte(strconv.FormatInt(1e12+int64(r.IntN(1000000)), 10)[1:]) // "000000123456"
}

// TestDifferentialAgainstSlice runs random Append/AppendInt/Delete/Find/Seek
// operations on a listpack and on a slice of members, deep-validating after
// every operation and comparing the bytes with FromMembers of the model.
func TestDifferentialAgainstSlice(t *testing.T) {
	ops := 120000
	if testing.Short() {
		ops = 20000
	}
	r := rand.New(rand.NewPCG(7, 2024))
	b := New()
	var model [][]byte
	gen := func() []byte { return genMember(r) }
	firstIndex := func(m []byte) int {
		return slices.IndexFunc(model, func(x []byte) bool { return bytes.Equal(x, m) })
	}
	for i := range ops {
		k := r.IntN(100)
		if len(model) >= 200 {
			k = 50 // delete
		}
		switch {
		case k < 35:
			m := gen()
			if got, want := len(b)+EntrySize(m), len(Append(append([]byte(nil), b...), m)); got != want {
				t.Fatalf("op %d: len + EntrySize(%q) = %d, want %d", i, trunc(m), got, want)
			}
			b = Append(b, m)
			model = append(model, m)
		case k < 40:
			v := int64(r.Uint64() >> r.IntN(64))
			if r.IntN(2) == 0 {
				v = -v
			}
			b = AppendInt(b, v)
			model = append(model, strconv.AppendInt(nil, v, 10))
		case k < 60:
			if len(model) == 0 {
				continue
			}
			idx := r.IntN(len(model))
			si := idx
			if r.IntN(2) == 0 {
				si = idx - len(model)
			}
			p := Seek(b, si)
			if p < 0 {
				t.Fatalf("op %d: Seek(%d) = -1 with %d entries", i, si, len(model))
			}
			c := cap(b)
			b = Delete(b, p)
			if cap(b) != c {
				t.Fatalf("op %d: Delete changed capacity %d -> %d", i, c, cap(b))
			}
			model = slices.Delete(model, idx, idx+1)
		case k < 85:
			var m []byte
			if len(model) > 0 && r.IntN(2) == 0 {
				m = model[r.IntN(len(model))]
			} else {
				m = gen()
			}
			want := -1
			if j := firstIndex(m); j >= 0 {
				want = Seek(b, j)
			}
			if got := Find(b, m); got != want {
				t.Fatalf("op %d: Find(%q) = %d, want %d", i, trunc(m), got, want)
			}
		default:
			idx := r.IntN(len(model)+4) - 2
			if r.IntN(2) == 0 {
				idx = -idx - 1
			}
			p := Seek(b, idx)
			j := idx
			if j < 0 {
				j += len(model)
			}
			if j < 0 || j >= len(model) {
				if p != -1 {
					t.Fatalf("op %d: Seek(%d) = %d with %d entries, want -1", i, idx, p, len(model))
				}
				continue
			}
			if got := AppendMember(nil, b, p); !bytes.Equal(got, model[j]) {
				t.Fatalf("op %d: member at Seek(%d) = %q, want %q", i, idx, trunc(got), trunc(model[j]))
			}
		}
		if err := Validate(b, true); err != nil {
			t.Fatalf("op %d: Validate = %v", i, err)
		}
		if got, want := Len(b), len(model); got != want {
			t.Fatalf("op %d: Len = %d, want %d", i, got, want)
		}
		if i%50 == 0 {
			if want := FromMembers(model); !bytes.Equal(b, want) {
				t.Fatalf("op %d: blob differs from FromMembers(model)", i)
			}
			got := members(t, b)
			if len(got) != len(model) {
				t.Fatalf("op %d: %d members walked, want %d", i, len(got), len(model))
			}
			for j := range got {
				if !bytes.Equal(got[j], model[j]) {
					t.Fatalf("op %d: member %d = %q, want %q", i, j, trunc(got[j]), trunc(model[j]))
				}
			}
		}
	}
}
