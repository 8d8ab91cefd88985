package command

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TestDecoderMatchesDecode decodes several entries into one Decoder before
// looking at any of them (as FSM.ApplyBatch does): each must be what Decode
// gives, so an entry decoded later must not overwrite an earlier one's ops or
// arguments, even when the storage grows in between.
func TestDecoderMatchesDecode(t *testing.T) {
	var wire [][]byte
	for i := range 40 {
		e := &Entry{Type: TypeBatch, NowMs: int64(i)}
		for j := range i * 7 { // up to 273 ops: past the first storage size
			e.Ops = append(e.Ops, Cmd([]byte("sadd"), fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "m%d", j)))
		}
		if i%5 == 0 {
			e.Ops = append(e.Ops, sampleEntry().Ops...)
		}
		wire = append(wire, e.Encode(nil))
	}
	var dc Decoder
	for round := range 3 { // reused after Reset
		var got []*Entry
		for _, b := range wire {
			e, err := dc.Decode(b)
			if err != nil {
				t.Fatalf("round %d: Decoder.Decode: %v", round, err)
			}
			got = append(got, e)
		}
		for i, b := range wire {
			want, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Fatalf("round %d, entry %d: Decoder gave %+v, Decode %+v", round, i, got[i], want)
			}
		}
		dc.Reset()
	}
}

// TestDecoderReusesStorage: once the storage has grown to a batch's size, a
// batch of that size decodes without allocating ops or argument slices
// (only the Entry), and Reset drops every reference to the decoded data so
// that the storage does not keep old log entries alive.
func TestDecoderReusesStorage(t *testing.T) {
	e := &Entry{Type: TypeBatch, NowMs: 1}
	for j := range 100 {
		e.Ops = append(e.Ops, Cmd([]byte("sadd"), []byte("key"), fmt.Appendf(nil, "m%d", j)))
	}
	b := e.Encode(nil)
	var dc Decoder
	if _, err := dc.Decode(b); err != nil {
		t.Fatal(err)
	}
	dc.Reset()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := dc.Decode(b); err != nil {
			t.Fatal(err)
		}
		dc.Reset()
	})
	if allocs != 1 {
		t.Errorf("Decode of 100 ops into warm storage: %v allocations, want 1 (the Entry)", allocs)
	}
	for i, op := range dc.ops[:cap(dc.ops)] {
		if op.Args != nil || op.Tx != nil || op.Reply != nil {
			t.Fatalf("after Reset, op %d still points at %+v", i, op)
		}
	}
	for i, a := range dc.args[:cap(dc.args)] {
		if a != nil {
			t.Fatalf("after Reset, argument %d still points at %q", i, a)
		}
	}
}

// TestDecoderErrors: a damaged entry is refused with the same error as
// Decode's, and the Decoder stays usable.
func TestDecoderErrors(t *testing.T) {
	b := sampleEntry().Encode(nil)
	var dc Decoder
	for n := 0; n < len(b); n++ {
		_, err := dc.Decode(b[:n])
		_, want := Decode(b[:n])
		if !errors.Is(err, ErrDecode) || err.Error() != want.Error() {
			t.Errorf("first %d of %d bytes: Decoder err %v, Decode err %v", n, len(b), err, want)
		}
	}
	dc.Reset()
	got, err := dc.Decode(b)
	if err != nil || !reflect.DeepEqual(got, sampleEntry()) {
		t.Errorf("after errors: %+v, %v", got, err)
	}
}
