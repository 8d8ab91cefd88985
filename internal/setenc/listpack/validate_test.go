package listpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// fix sets total_bytes to the blob length.
func fix(b []byte) []byte {
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       []byte
		shallow string // "" = shallow passes
		deep    string // "" = deep passes
	}{
		{"nil", nil, "shorter than", "shorter than"},
		{"6 bytes", hx("06 00 00 00 00 00"), "shorter than", "shorter than"},
		{"total_bytes too big", hx("08 00 00 00 00 00 FF"), "total_bytes header 8", "total_bytes"},
		{"total_bytes huge", hx("FF FF FF FF 00 00 FF"), "total_bytes", "total_bytes"},
		{"no terminator", hx("07 00 00 00 00 00 FE"), "last byte 0xFE at offset 6", "last byte"},
		{"empty", New(), "", ""},
		{"empty with count 1", hx("07 00 00 00 01 00 FF"), "", "header count 1 at offset 4 does not match 0 entries"},
		{"count 2 for 1 entry", fix(hx("00 00 00 00 02 00 81 61 02 FF")), "", "header count 2"},
		{"count 65535 for 1 entry", fix(hx("00 00 00 00 FF FF 81 61 02 FF")), "", ""},
		{"invalid encoding F5", fix(hx("00 00 00 00 01 00 F5 02 FF")), "", "invalid entry encoding 0xF5 at offset 6"},
		{"invalid encoding FE", fix(hx("00 00 00 00 01 00 01 01 FE 01 FF")), "", "invalid entry encoding 0xFE at offset 8"},
		{"early terminator", fix(hx("00 00 00 00 01 00 FF 01 01 FF")), "", "terminator byte at offset 6 before the end"},
		{"string past end", fix(hx("00 00 00 00 01 00 85 61 02 FF")), "", "entry at offset 6 of 7 bytes"},
		{"string reaching terminator", fix(hx("00 00 00 00 01 00 82 61 62 FF")), "", "runs past the end"},
		{"12-bit length field cut", fix(hx("00 00 00 00 01 00 E0 FF")), "", "length field of entry at offset 6"},
		{"32-bit length field cut", fix(hx("00 00 00 00 01 00 F0 01 00 00 FF")), "", "length field"},
		{"32-bit string of 4 GB in 20 bytes", fix(hx("00 00 00 00 01 00 F0 FF FF FF FF 61 62 63 64 65 66 67 68 FF")), "", "entry at offset 6 of 4294967305 bytes"},
		{"int64 past end", fix(hx("00 00 00 00 01 00 F4 01 02 03 FF")), "", "runs past the end"},
		{"wrong backlen", fix(hx("00 00 00 00 01 00 81 61 03 FF")), "", "decodes to 3, entry at offset 6 has size 2"},
		{"backlen of 6 bytes", fix(hx("00 00 00 00 01 00 F4 80 80 80 80 80 80 80 80 FF FF")), "", "longer than 5 bytes"},
		{"second entry bad", fix(hx("00 00 00 00 02 00 01 01 C1 2C 03 FF")), "", "entry at offset 8"},
		{"13-bit int cut", fix(hx("00 00 00 00 01 00 C1 FF")), "", "runs past the end"},
	} {
		err := Validate(tc.b, false)
		check(t, tc.name+" shallow", err, tc.shallow)
		err = Validate(tc.b, true)
		check(t, tc.name+" deep", err, tc.deep)
	}
}

func check(t *testing.T, what string, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("Validate(%s) = %v, want nil", what, err)
		}
		return
	}
	if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate(%s) = %v, want an ErrCorrupt containing %q", what, err, want)
	}
}

// TestValidateNonCanonicalBacklen: like Redis, only the backlen's value and
// its canonical size matter. Here a 198-byte string (L = 200) ends with a
// zero byte and its backlen is 81 C8 instead of 01 C8; reading leftwards it
// still decodes to 200 (the zero data byte ends it), so Redis accepts it and
// so must we, and backward iteration must still work.
func TestValidateNonCanonicalBacklen(t *testing.T) {
	data := append(rep("d", 197), 0)
	b := fix(cat(hx("00 00 00 00 02 00 E0 C6"), data, hx("81 C8"), hx("01 01 FF")))
	if err := ValidateSet(b); err != nil {
		t.Fatalf("ValidateSet(non-canonical backlen) = %v, want nil", err)
	}
	offs := offsets(t, b)
	if got, want := len(offs), 2; got != want {
		t.Fatalf("entries = %d, want %d", got, want)
	}
	if got, want := Prev(b, offs[1]), HeaderSize; got != want {
		t.Errorf("Prev(%d) = %d, want %d", offs[1], got, want)
	}
	checkIterable(t, b)
}

func TestValidateSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"A.1", build(bs("a", "1", "-1", "300", "hello", "007")...), ""},
		{"empty", New(), ""},
		{"one", build(bs("x")...), ""},
		{"string dup", build(bs("a", "b", "a")...), `duplicate set member "a": entries at offsets 6 and 12`},
		{"int dup", build(bs("1", "2", "1")...), `duplicate set member "1"`},
		{"big int dup", build(bs("-5000000000", "x", "-5000000000")...), `duplicate set member "-5000000000"`},
		{"int 1 and string 1", fix(hx("00 00 00 00 02 00 01 01 81 31 02 FF")), `duplicate set member "1": entries at offsets 6 and 8`},
		{"int 7 as 7-bit and as int16", fix(hx("00 00 00 00 02 00 07 01 F1 07 00 03 FF")), `duplicate set member "7"`},
		{"int 1 and string 01", build(bs("1", "01")...), ""},
		{"empty string dup", build(bs("", "")...), `duplicate set member ""`},
		{"long dup", build(bs(string(rep("z", 5000)), "q", string(rep("z", 5000)))...), "duplicate set member"},
		{"corrupt", fix(hx("00 00 00 00 01 00 F5 02 FF")), "invalid entry encoding"},
		{"not even shallow", hx("07 00"), "shorter than"},
	} {
		err := ValidateSet(tc.b)
		if tc.want == "" {
			if err != nil {
				t.Errorf("ValidateSet(%s) = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidateSet(%s) = %v, want an ErrCorrupt containing %q", tc.name, err, tc.want)
		}
	}
	// Many entries (past the 128-entry stack buffer), duplicate at the end.
	var ms [][]byte
	for i := range 1000 {
		ms = append(ms, []byte("m"+strings.Repeat("0", i%7)+string(rune('a'+i%26))+itoa(i)))
	}
	b := FromMembers(ms)
	if err := ValidateSet(b); err != nil {
		t.Errorf("ValidateSet(1000 distinct) = %v, want nil", err)
	}
	b = Append(b, ms[500])
	if err := ValidateSet(b); err == nil {
		t.Errorf("ValidateSet(1000 distinct + dup) = nil, want an error")
	}
}

func itoa(i int) string { return string(AppendMember(nil, AppendInt(New(), int64(i)), HeaderSize)) }

func corpus() map[string][]byte {
	return map[string][]byte{
		"A.1": build(bs("a", "1", "-1", "300", "hello", "007")...),
		"all encodings": build(bs("", "x", "127", "128", "-4096", "4096", "-32768", "100000", "-8388609",
			"2147483648", "-9223372036854775808", string(rep("m", 64)), string(rep("n", 200)))...),
		"redis listpack_mixed": FromMembers(bs("apple", "banana", "42", "-7", "3.14", "", "cherry pie",
			"18446744073709551616", "100000")),
		"big string": build(bs("a", string(rep("B", 4100)), "c")...),
	}
}

// TestCorruptTruncations: every truncation fails shallow validation; every
// truncation repaired into a shallow-valid blob (terminator and total_bytes
// fixed) either fails deep validation or iterates cleanly.
func TestCorruptTruncations(t *testing.T) {
	for name, orig := range corpus() {
		for i := 0; i < len(orig); i++ {
			cut := append([]byte(nil), orig[:i]...)
			wantCorrupt(t, Validate(cut, false), name+" truncated shallow")
			wantCorrupt(t, Validate(cut, true), name+" truncated deep")
			wantCorrupt(t, ValidateSet(cut), name+" truncated set")
			if i < HeaderSize {
				continue
			}
			rep := fix(append(cut, terminator))
			if err := Validate(rep, true); err != nil {
				wantCorrupt(t, err, name+" repaired truncation")
				continue
			}
			checkIterable(t, rep)
		}
	}
}

// TestCorruptByteFlips: every single-byte change (all 255 other values at
// every offset; for big blobs, offsets near entry boundaries only) either
// fails validation with ErrCorrupt or leaves a blob that iterates cleanly.
func TestCorruptByteFlips(t *testing.T) {
	for name, orig := range corpus() {
		for i := range orig {
			if len(orig) > 1000 && i > 40 && i < len(orig)-40 {
				continue
			}
			for x := 1; x < 256; x++ {
				b := append([]byte(nil), orig...)
				b[i] ^= byte(x)
				if err := Validate(b, true); err != nil {
					wantCorrupt(t, err, name+" flipped")
					if ValidateSet(b) == nil {
						t.Fatalf("%s: byte %d ^ %#x: ValidateSet passes but Validate(deep) fails", name, i, x)
					}
					continue
				}
				checkIterable(t, b)
				if err := ValidateSet(b); err != nil {
					wantCorrupt(t, err, name+" flipped set")
				}
			}
		}
	}
}

// TestValidateHugeClaimsAllocateNothing: lengths claimed inside the blob
// never drive allocations.
func TestValidateHugeClaimsAllocateNothing(t *testing.T) {
	b := fix(hx("00 00 00 00 01 00 F0 FF FF FF FF 61 62 63 64 65 66 67 68 FF"))
	good := build(bs("a", "1", "-1", "300", "hello", "007")...)
	allocs := testing.AllocsPerRun(100, func() {
		_ = Validate(good, true)
		_ = ValidateSet(good)
	})
	if allocs != 0 {
		t.Errorf("allocations per Validate+ValidateSet of a valid blob = %v, want 0", allocs)
	}
	var err error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		err = Validate(b, true)
	}
	runtime.ReadMemStats(&after)
	wantCorrupt(t, err, "4 GB claim")
	if perRun := (after.TotalAlloc - before.TotalAlloc) / 100; perRun > 1024 {
		t.Errorf("bytes allocated per Validate(4 GB claim) = %d, want only the error's (< 1024)", perRun)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("offset 6")) {
		t.Errorf("error %q does not name offset 6", err)
	}
}
