package listpack

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// hx decodes hex with optional spaces: hx("81 61 02").
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func rep(s string, n int) []byte { return bytes.Repeat([]byte(s), n) }

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func build(members ...[]byte) []byte {
	b := New()
	for _, m := range members {
		b = Append(b, m)
	}
	return b
}

// offsets walks b forwards and backwards and fails unless both agree.
func offsets(t testing.TB, b []byte) []int {
	t.Helper()
	var fwd []int
	for p := First(b); p >= 0; p = Next(b, p) {
		fwd = append(fwd, p)
		if len(fwd) > len(b) {
			t.Fatalf("forward walk does not end (blob %d bytes)", len(b))
		}
	}
	var back []int
	for p := Last(b); p >= 0; p = Prev(b, p) {
		back = append(back, p)
		if len(back) > len(b) {
			t.Fatalf("backward walk does not end (blob %d bytes)", len(b))
		}
	}
	if len(fwd) != len(back) {
		t.Fatalf("forward walk has %d entries, backward %d", len(fwd), len(back))
	}
	for i, p := range fwd {
		if q := back[len(back)-1-i]; q != p {
			t.Fatalf("entry %d: forward offset %d, backward offset %d", i, p, q)
		}
	}
	return fwd
}

// members returns the string forms of all entries.
func members(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range offsets(t, b) {
		out = append(out, AppendMember(nil, b, p))
	}
	return out
}

// checkIterable exercises every reader on a blob that passed Validate(b, true).
func checkIterable(t testing.TB, b []byte) {
	t.Helper()
	offs := offsets(t, b)
	if got, want := Len(b), len(offs); got != want {
		t.Fatalf("Len = %d, want %d (entries walked)", got, want)
	}
	for i, p := range offs {
		s, v, isInt := Get(b, p)
		m := AppendMember(nil, b, p)
		if !isInt && !bytes.Equal(s, m) {
			t.Fatalf("AppendMember(entry %d) = %q, want %q", i, m, s)
		}
		_ = v
		if i < 64 {
			if got, want := Seek(b, i), p; got != want {
				t.Fatalf("Seek(%d) = %d, want %d", i, got, want)
			}
			if got, want := Seek(b, i-len(offs)), p; got != want {
				t.Fatalf("Seek(%d) = %d, want %d", i-len(offs), got, want)
			}
			f := Find(b, m)
			if f < 0 || f > p || !bytes.Equal(AppendMember(nil, b, f), m) {
				t.Fatalf("Find(%q) = %d, want an entry at or before %d with that string form", m, f, p)
			}
		}
	}
	if got := Seek(b, len(offs)); got != -1 {
		t.Fatalf("Seek(%d) = %d, want -1", len(offs), got)
	}
}

func wantCorrupt(t testing.TB, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got nil error, want one wrapping ErrCorrupt", what)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: error %v does not wrap ErrCorrupt", what, err)
	}
}
