package command

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleEntry() *Entry {
	return &Entry{Type: TypeBatch, NowMs: 1700000000123, Ops: []Op{
		Cmd([]byte("sadd"), []byte("k"), []byte("a"), []byte{0, 0xff}),
		{Kind: OpTx, Tx: &Tx{
			Watches: []Watch{{Key: []byte("w"), Exists: true, Stamp: 42}, {Key: []byte("x"), Stamp: 7}},
			Ops:     []Op{Cmd([]byte("set"), []byte("k2"), []byte("")), {Kind: OpReply, Reply: Error(ErrSyntax)}},
		}},
		{Kind: OpReply, Reply: Error(ErrSyntax)},
	}}
}

func TestEntryRoundTrip(t *testing.T) {
	e := sampleEntry()
	b := e.Encode(nil)
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Errorf("Decode(Encode(e)) = %+v, want %+v", got, e)
	}
	if again := got.Encode(nil); !bytes.Equal(again, b) {
		t.Errorf("re-encoding differs")
	}
}

// TestOpReplyWireByte pins the op kind byte of a pre-decided reply (written
// as "error" by older binaries): logs already on disk must decode.
func TestOpReplyWireByte(t *testing.T) {
	old := []byte{1, byte(TypeBatch), 0, 1, 2, 5, '+', 'O', 'K', '\r', '\n'}
	e, err := Decode(old)
	if err != nil || len(e.Ops) != 1 || e.Ops[0].Kind != OpReply || string(e.Ops[0].Reply) != "+OK\r\n" {
		t.Fatalf("Decode(%q) = %+v, %v; want one OpReply +OK", old, e, err)
	}
	if again := e.Encode(nil); !bytes.Equal(again, old) {
		t.Errorf("Encode = %q, want %q", again, old)
	}
}

func TestDecodeRejectsEveryTruncation(t *testing.T) {
	b := sampleEntry().Encode(nil)
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrDecode) {
			t.Errorf("Decode(first %d of %d bytes) err = %v, want ErrDecode", n, len(b), err)
		}
	}
}

func TestDecodeUnknownTypes(t *testing.T) {
	if _, err := Decode([]byte{1, 5}); !errors.Is(err, ErrDecode) {
		t.Errorf("unknown type: err = %v, want ErrDecode", err)
	}
	e, err := Decode([]byte{1, byte(IgnoreIfUnknown | 5), 1, 2, 3})
	if err != nil || len(e.Ops) != 0 || e.Node != nil {
		t.Errorf("ignorable type: %v, %v; want empty entry", e, err)
	}
	if _, err := Decode([]byte{Version + 1, 1, 0, 0}); !errors.Is(err, ErrDecode) {
		t.Errorf("future version: err = %v, want ErrDecode", err)
	}
}

// A decode error tells an entry of a newer format (upgrade this binary)
// from a damaged one, and says which format version the entry claims.
func TestDecodeErrorKinds(t *testing.T) {
	for _, c := range []struct {
		name    string
		b       []byte
		version byte
		newer   bool
		text    string
	}{
		{"newer version", []byte{Version + 1, 1, 0, 0}, Version + 1, true,
			"entry written by a newer raftset (format version 4, this binary reads up to 3)"},
		{"newer version, short", []byte{Version + 7}, Version + 7, true, "newer raftset (format version 10"},
		{"empty", nil, 0, false, "corrupt entry (format version 0): entry of 0 bytes"},
		{"version zero", []byte{0, 1, 0, 0}, 0, false, "corrupt entry (format version 0): unknown format version"},
		{"unknown type", []byte{1, 5}, 1, false, "corrupt entry (format version 1): unknown entry type 5"},
		{"bad op kind", []byte{1, byte(TypeBatch), 0, 1, 9, 0}, 1, false, "corrupt entry (format version 1): op kind at offset 5"},
		{"node, trailing", append(nodeEntry().Encode(nil), 0), 1, false, "trailing bytes"},
		{"slot entry in version 1", []byte{1, byte(TypeSlot), 0, 1, 0, 0, 0, 0}, 1, false, "slot entry in format version 1"},
		{"slot, unknown action", []byte{2, byte(TypeSlot), 0, 9, 0, 0, 0, 0}, 2, false, "slot action at offset 4"},
		{"slot abort in version 2", []byte{2, byte(TypeSlot), 0, byte(SlotAbort), 0, 0, 0, 0}, 2, false, "slot abort in format version 2"},
		{"slot, reversed range", []byte{2, byte(TypeSlot), 0, 1, 5, 4, 0, 0}, 2, false, "slot range"},
		{"slot, past the last slot", slotEntry(SlotFreeze, 0, 16384, nil).Encode(nil), 2, false, "slot range"},
		{"slot, batch on a freeze", slotEntry(SlotFreeze, 0, 1, []byte("x")).Encode(nil), 2, false, "slot batch"},
		{"slot, trailing", append(slotEntry(SlotDrop, 3, 3, nil).Encode(nil), 0), 2, false, "trailing bytes"},
	} {
		_, err := Decode(c.b)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err = %v, want a *DecodeError wrapping ErrDecode", c.name, err)
			continue
		}
		if de.Version != c.version || de.Newer != c.newer || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: err = %q (version %d, newer %v), want version %d, newer %v, text %q",
				c.name, err, de.Version, de.Newer, c.version, c.newer, c.text)
		}
	}
}

func nodeEntry() *Entry {
	return &Entry{Type: TypeNode, Node: &NodeAddr{ID: "n1", Addr: "10.0.0.1:6379"}}
}

func TestNodeEntry(t *testing.T) {
	if TypeNode&IgnoreIfUnknown == 0 {
		t.Fatal("TypeNode must be ignorable: binaries that predate it skip it")
	}
	e := nodeEntry()
	b := e.Encode(nil)
	if want := "\x01\x82\x02n1\x0d10.0.0.1:6379"; string(b) != want {
		t.Errorf("Encode = %q, want %q", b, want)
	}
	got, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("Decode(Encode(node entry)) = %+v, %v; want %+v", got, err, e)
	}
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrDecode) {
			t.Errorf("Decode(first %d of %d bytes) err = %v, want ErrDecode", n, len(b), err)
		}
	}
}

func slotEntry(a SlotAction, first, last int, batch []byte) *Entry {
	return &Entry{Type: TypeSlot, NowMs: 1700000000123, Slot: &SlotOp{Action: a, First: first, Last: last, Epoch: 7, Batch: batch}}
}

// A slot entry is format version 2 (a version-1 binary must stop at it,
// not skip it), an abort's SlotAbort version 3 (a version-2 binary does not
// know the action: it must stop with "newer raftset", not call the entry
// corrupt); batches and node addresses stay version 1, so a leader that
// writes no slot entry needs no upgraded members.
func TestSlotEntry(t *testing.T) {
	if TypeSlot&IgnoreIfUnknown != 0 {
		t.Fatal("TypeSlot must not be ignorable: a replica that skipped a freeze would take writes the others refuse")
	}
	for _, c := range []struct {
		e       *Entry
		version byte
	}{
		{sampleEntry(), 1},
		{nodeEntry(), 1},
		{slotEntry(SlotFreeze, 0, 0, nil), 2},
		{slotEntry(SlotImport, 100, 100, []byte("\x01\x01k")), 2},
		{slotEntry(SlotDrop, 0, 16383, nil), 2},
		{slotEntry(SlotUnfreeze, 0, 16383, nil), 2},
		{slotEntry(SlotAbort, 0, 16383, nil), 3},
	} {
		b := c.e.Encode(nil)
		if b[0] != c.version {
			t.Errorf("%v entry written in version %d, want %d", c.e.Type, b[0], c.version)
		}
		got, err := Decode(b)
		if err != nil || !reflect.DeepEqual(got, c.e) {
			t.Errorf("Decode(Encode(%+v)) = %+v, %v", c.e, got, err)
		}
	}
	b := slotEntry(SlotImport, 5, 6, []byte("batch")).Encode(nil)
	if want := "\x02\x03\xfb\xd0\x95\xff\xbc\x31\x03\x05\x06\x07\x05batch"; string(b) != want {
		t.Errorf("Encode(import) = %q, want %q", b, want)
	}
	if b := slotEntry(SlotAbort, 5, 6, nil).Encode(nil); string(b) != "\x03\x03\xfb\xd0\x95\xff\xbc\x31\x06\x05\x06\x07\x00" {
		t.Errorf("Encode(abort) = %q", b)
	}
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrDecode) {
			t.Errorf("Decode(first %d of %d bytes) err = %v, want ErrDecode", n, len(b), err)
		}
	}
}

func TestLegacyNode(t *testing.T) {
	op := Cmd([]byte(LegacyNodeCommand), []byte("n2"), []byte("h:1"))
	if a, ok := op.LegacyNode(); !ok || a != (NodeAddr{ID: "n2", Addr: "h:1"}) {
		t.Errorf("LegacyNode(raftset.node n2 h:1) = %+v, %v", a, ok)
	}
	for _, op := range []Op{
		Cmd([]byte(LegacyNodeCommand), []byte("n2")),
		Cmd([]byte("RAFTSET.NODE"), []byte("n2"), []byte("h:1")), // never written so
		Cmd([]byte("sadd"), []byte("n2"), []byte("h:1")),
		{Kind: OpReply, Reply: []byte("-ERR x\r\n")},
	} {
		if a, ok := op.LegacyNode(); ok {
			t.Errorf("LegacyNode(%q) = %+v, want none", op.Args, a)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sampleEntry().Encode(nil))
	f.Add([]byte{1, byte(TypeBatch), 0, 0})
	f.Add(nodeEntry().Encode(nil))
	f.Add(slotEntry(SlotImport, 5, 6, []byte("batch")).Encode(nil))
	f.Add(slotEntry(SlotFreeze, 0, 16383, nil).Encode(nil))
	f.Add(slotEntry(SlotAbort, 0, 16383, nil).Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		// What decodes must survive a re-encoding unchanged (the bytes may
		// differ: a varint can be written non-minimally).
		if e.Type == TypeBatch || e.Type == TypeNode || e.Type == TypeSlot {
			again, err := Decode(e.Encode(nil))
			if err != nil || !reflect.DeepEqual(again, e) {
				t.Fatalf("Decode(Encode(Decode(b))) = %v, %v", again, err)
			}
		}
	})
}
