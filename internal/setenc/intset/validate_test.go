package intset

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// refDecode is a deliberately naive second implementation of the format
// (byte-by-byte, shift-based sign extension) to judge Validate against.
func refDecode(b []byte) (vals []int64, shallowOK, deepOK bool) {
	if len(b) < 8 {
		return nil, false, false
	}
	u32 := func(o int) uint64 {
		return uint64(b[o]) | uint64(b[o+1])<<8 | uint64(b[o+2])<<16 | uint64(b[o+3])<<24
	}
	w, n := u32(0), u32(4)
	if w != 2 && w != 4 && w != 8 {
		return nil, false, false
	}
	if 8+n*w != uint64(len(b)) || n == 0 {
		return nil, false, false
	}
	for i := range int(n) {
		var u uint64
		for k := int(w) - 1; k >= 0; k-- {
			u = u<<8 | uint64(b[8+i*int(w)+k])
		}
		shift := 64 - 8*w
		vals = append(vals, int64(u<<shift)>>shift)
	}
	for i := 1; i < len(vals); i++ {
		if vals[i] <= vals[i-1] {
			return vals, true, false
		}
	}
	return vals, true, true
}

// validSamples are valid blobs of every width, including ones whose width
// is wider than their values need (legal: Remove never downgrades).
func validSamples() [][]byte {
	wide4, _ := Remove(FromSorted([]int64{1, 2, 70000}), 70000)
	wide8, _ := Remove(FromSorted([]int64{-1 << 40, -3, 9}), -1<<40)
	return [][]byte{
		FromSorted([]int64{7}),
		FromSorted([]int64{1, 2, 3}),
		FromSorted([]int64{-32768, -5, 1, 2, 3, 100, 32767}),
		FromSorted([]int64{1, 5, 70000}),
		FromSorted([]int64{math.MinInt32, -70000, 1, 70000, math.MaxInt32}),
		FromSorted([]int64{math.MinInt64, 1, 5000000000, math.MaxInt64}),
		wide4, wide8,
	}
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blob    string
		deep    bool
		wantErr string // "" = valid
	}{
		{"empty input", "", false, "header truncated: blob is 0 bytes"},
		{"7 bytes", "02 00 00 00 01 00 00", false, "header truncated: blob is 7 bytes"},
		{"encoding 0", "00 00 00 00 01 00 00 00 01 00", false, "encoding 0 at offset 0"},
		{"encoding 1", "01 00 00 00 01 00 00 00 01", false, "encoding 1 at offset 0"},
		{"encoding 3", "03 00 00 00 01 00 00 00 01 00 00", false, "encoding 3 at offset 0"},
		{"encoding 16", "10 00 00 00 01 00 00 00 01 00", false, "encoding 16 at offset 0"},
		{"encoding 2 high bytes", "02 00 00 01 01 00 00 00 01 00", false, "encoding 16777218 at offset 0"},
		{"length too big", "02 00 00 00 02 00 00 00 01 00", false, "length 2 at offset 4 with width 2 needs 12 bytes, blob is 10"},
		{"length too small", "02 00 00 00 01 00 00 00 01 00 02 00", false, "length 1 at offset 4 with width 2 needs 10 bytes, blob is 12"},
		{"length max u32", "08 00 00 00 ff ff ff ff 01 00 00 00 00 00 00 00", false, "length 4294967295 at offset 4 with width 8 needs 34359738368 bytes"},
		{"odd tail", "04 00 00 00 01 00 00 00 01 00 00 00 00", false, "needs 12 bytes, blob is 13"},
		{"empty intset", "02 00 00 00 00 00 00 00", false, "length 0 at offset 4: empty intset"},
		{"empty intset width 8", "08 00 00 00 00 00 00 00", true, "length 0 at offset 4: empty intset"},
		{"duplicate shallow", "02 00 00 00 02 00 00 00 05 00 05 00", false, ""},
		{"duplicate deep", "02 00 00 00 02 00 00 00 05 00 05 00", true, "value 5 at index 1 (offset 10) is not above previous value 5"},
		{"descending deep", "04 00 00 00 03 00 00 00 01 00 00 00 03 00 00 00 02 00 00 00", true, "value 2 at index 2 (offset 16) is not above previous value 3"},
		{"sign matters deep", "02 00 00 00 02 00 00 00 01 00 ff ff", true, "value -1 at index 1 (offset 10) is not above previous value 1"},
		{"A.2 deep", "02 00 00 00 03 00 00 00 01 00 02 00 03 00", true, ""},
		{"non-minimal width deep", "08 00 00 00 01 00 00 00 07 00 00 00 00 00 00 00", true, ""},
	} {
		err := Validate(unhex(t, tc.blob), tc.deep)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Validate = %v, want nil", tc.name, err)
		case tc.wantErr != "" && err == nil:
			t.Errorf("%s: Validate = nil, want error containing %q", tc.name, tc.wantErr)
		case err != nil && !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: Validate = %v, want it to wrap ErrCorrupt", tc.name, err)
		case err != nil && !strings.Contains(err.Error(), tc.wantErr):
			t.Errorf("%s: Validate = %q, want it to contain %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestValidateTruncations(t *testing.T) {
	for _, b := range validSamples() {
		for _, deep := range []bool{false, true} {
			if err := Validate(b, deep); err != nil {
				t.Fatalf("Validate(% x, %v) = %v, want nil", b, deep, err)
			}
			for i := range len(b) {
				if err := Validate(b[:i], deep); !errors.Is(err, ErrCorrupt) {
					t.Errorf("Validate(% x [first %d bytes], %v) = %v, want ErrCorrupt", b, i, deep, err)
				}
			}
			for _, extra := range []int{1, Width(b), 8} {
				long := append(slices.Clone(b), make([]byte, extra)...)
				if err := Validate(long, deep); !errors.Is(err, ErrCorrupt) {
					t.Errorf("Validate(% x + %d zero bytes, %v) = %v, want ErrCorrupt", b, extra, deep, err)
				}
			}
		}
	}
}

// TestValidateByteFlips flips bits at every offset of every sample. A flip
// may keep the blob valid (a value changing but staying in order), so each
// verdict is checked against refDecode rather than assumed to be an error.
func TestValidateByteFlips(t *testing.T) {
	var stillValid, corrupt int
	for _, orig := range validSamples() {
		for off := range len(orig) {
			for _, mask := range []byte{0x01, 0x02, 0x10, 0x40, 0x80, 0xff} {
				b := slices.Clone(orig)
				b[off] ^= mask
				_, refShallow, refDeep := refDecode(b)
				for _, deep := range []bool{false, true} {
					want := refShallow
					if deep {
						want = refDeep
					}
					err := Validate(b, deep)
					if (err == nil) != want {
						t.Errorf("Validate(% x, %v) = %v, reference says valid=%v", b, deep, err, want)
					}
					if err != nil && !errors.Is(err, ErrCorrupt) {
						t.Errorf("Validate(% x, %v) = %v, want it to wrap ErrCorrupt", b, deep, err)
					}
				}
				if refDeep {
					stillValid++
					checkAccessors(t, b)
				} else {
					corrupt++
				}
			}
		}
	}
	t.Logf("flips: %d still deep-valid, %d corrupt", stillValid, corrupt)
}

// checkAccessors exercises every accessor on a deep-valid blob and checks
// that rebuilding it from New() with Add reproduces it: values always, bytes
// once the rebuilt set is forced to the blob's width.
func checkAccessors(t testing.TB, b []byte) {
	t.Helper()
	want, _, _ := refDecode(b)
	n, w := Len(b), Width(b)
	if n != len(want) {
		t.Fatalf("Len(% x) = %d, want %d", b, n, len(want))
	}
	got := make([]int64, 0, n)
	Iterate(b, func(v int64) bool { got = append(got, v); return true })
	if !slices.Equal(got, want) {
		t.Fatalf("Iterate(% x) = %v, want %v", b, got, want)
	}
	for i, v := range want {
		if g := Get(b, i); g != v {
			t.Fatalf("Get(% x, %d) = %d, want %d", b, i, g, v)
		}
		if pos, ok := Search(b, v); pos != i || !ok {
			t.Fatalf("Search(% x, %d) = %d, %v, want %d, true", b, v, pos, ok, i)
		}
		if i > 0 && v <= want[i-1] {
			t.Fatalf("Iterate(% x) not strictly ascending at %d", b, i)
		}
	}
	if Min(b) != want[0] || Max(b) != want[n-1] {
		t.Fatalf("Min, Max(% x) = %d, %d, want %d, %d", b, Min(b), Max(b), want[0], want[n-1])
	}

	minimal := FromSorted(want)
	r := New()
	for _, v := range want {
		r, _ = Add(r, v)
	}
	if !bytes.Equal(r, minimal) {
		t.Fatalf("Add from New() = % x, FromSorted = % x", r, minimal)
	}
	if Width(minimal) == w && !bytes.Equal(minimal, b) {
		t.Fatalf("re-encoded % x, want % x", minimal, b)
	}
	// Widen first with a throwaway value, as a Redis set that once held a
	// wide value would be, then the bytes must match exactly.
	forced := New()
	var probe int64
	switch w {
	case 4:
		probe = math.MaxInt32
	case 8:
		probe = math.MaxInt64
	}
	if w > 2 {
		forced, _ = Add(forced, probe)
	}
	for _, v := range want {
		forced, _ = Add(forced, v)
	}
	if w > 2 && !slices.Contains(want, probe) {
		forced, _ = Remove(forced, probe)
	}
	if !bytes.Equal(forced, b) {
		t.Fatalf("re-encoded at width %d: % x, want % x", w, forced, b)
	}

	// Mutations on a copy stay valid and keep the width.
	c := slices.Clone(b)
	mid := want[n/2]
	c, ok := Remove(c, mid)
	if !ok || Contains(c, mid) || Width(c) != w {
		t.Fatalf("Remove(% x, %d) = %v; Contains after = %v; width %d, want %d", b, mid, ok, Contains(c, mid), Width(c), w)
	}
	if Len(c) > 0 {
		if err := Validate(c, true); err != nil {
			t.Fatalf("Validate after Remove(% x, %d) = %v", b, mid, err)
		}
	}
	c, ok = Add(c, mid)
	if !ok || !bytes.Equal(c, b) {
		t.Fatalf("Remove then Add(%d) = % x, want % x", mid, c, b)
	}
}

func FuzzValidate(f *testing.F) {
	for _, b := range validSamples() {
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Add(New())
	f.Add(unhex(f, "02 00 00 00 02 00 00 00 05 00 05 00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		shallow, deep := Validate(b, false), Validate(b, true)
		for _, err := range []error{shallow, deep} {
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Validate(% x) = %v, want it to wrap ErrCorrupt", b, err)
			}
		}
		_, refShallow, refDeep := refDecode(b)
		if (shallow == nil) != refShallow || (deep == nil) != refDeep {
			t.Fatalf("Validate(% x) = %v / %v (shallow/deep), reference says %v / %v", b, shallow, deep, refShallow, refDeep)
		}
		if deep != nil {
			return
		}
		checkAccessors(t, slices.Clip(b))
	})
}
