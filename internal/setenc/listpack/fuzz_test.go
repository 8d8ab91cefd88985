package listpack

import (
	"encoding/binary"
	"errors"
	"testing"
)

// seeds adds small valid and invalid blobs. Big seeds are left out on
// purpose: the fuzzer minimizes every new interesting input (up to 60s by
// default) and minimizing a 4 KB input stalls a short fuzz run.
func seeds(f *testing.F) {
	for _, b := range corpus() {
		if len(b) <= 512 {
			f.Add(b)
		}
	}
	f.Add(New())
	f.Add([]byte{})
	f.Add(hx("07 00"))
	u := build(bs("a", "b", "a")...)
	binary.LittleEndian.PutUint16(u[4:], unknownCount)
	f.Add(u)
	f.Add(fix(hx("00 00 00 00 02 00 01 01 81 31 02 FF")))
	f.Add(fix(hx("00 00 00 00 01 00 F0 FF FF FF FF 61 62 63 64 65 66 67 68 FF")))
	f.Add(fix(cat(hx("00 00 00 00 02 00 E0 C6"), rep("d", 197), []byte{0}, hx("81 C8 01 01 FF"))))
}

// FuzzValidate: arbitrary bytes never panic or hang Validate; errors wrap
// ErrCorrupt; a deep-valid blob iterates the same both ways, Len matches,
// and every reader works on it.
func FuzzValidate(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzValidate(t, b)
		if r := repaired(b); r != nil {
			fuzzValidate(t, r)
		}
	})
}

// repaired returns a copy of b with total_bytes set to its length, so that
// mutations that did not keep the header right still reach deep validation
// (nil when b is too short to have a header).
func repaired(b []byte) []byte {
	if len(b) < minSize || Bytes(b) == len(b) {
		return nil
	}
	return fix(append([]byte(nil), b...))
}

func fuzzValidate(t *testing.T, b []byte) {
	shallow := Validate(b, false)
	if shallow != nil && !errors.Is(shallow, ErrCorrupt) {
		t.Fatalf("Validate(shallow) error %v does not wrap ErrCorrupt", shallow)
	}
	deep := Validate(b, true)
	if deep != nil {
		if !errors.Is(deep, ErrCorrupt) {
			t.Fatalf("Validate(deep) error %v does not wrap ErrCorrupt", deep)
		}
		return
	}
	if shallow != nil {
		t.Fatalf("deep validation passed but shallow failed: %v", shallow)
	}
	checkIterable(t, b)
}

// FuzzValidateSet: ValidateSet never panics; it fails whenever deep
// Validate fails; on a deep-valid blob it fails exactly when two entries
// have the same string form.
func FuzzValidateSet(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzValidateSet(t, b)
		if r := repaired(b); r != nil {
			fuzzValidateSet(t, r)
		}
	})
}

func fuzzValidateSet(t *testing.T, b []byte) {
	err := ValidateSet(b)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ValidateSet error %v does not wrap ErrCorrupt", err)
	}
	if Validate(b, true) != nil {
		if err == nil {
			t.Fatalf("ValidateSet passed a blob deep Validate rejects")
		}
		return
	}
	seen := map[string]bool{}
	dup := false
	for _, m := range members(t, b) {
		if seen[string(m)] {
			dup = true
		}
		seen[string(m)] = true
	}
	if dup != (err != nil) {
		t.Fatalf("ValidateSet = %v, duplicate string forms present: %v", err, dup)
	}
	checkIterable(t, b)
}
