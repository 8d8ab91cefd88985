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
	old := []byte{Version, byte(TypeBatch), 0, 1, 2, 5, '+', 'O', 'K', '\r', '\n'}
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
	if _, err := Decode([]byte{Version, 5}); !errors.Is(err, ErrDecode) {
		t.Errorf("unknown type: err = %v, want ErrDecode", err)
	}
	e, err := Decode([]byte{Version, byte(IgnoreIfUnknown | 5), 1, 2, 3})
	if err != nil || len(e.Ops) != 0 || e.Node != nil {
		t.Errorf("ignorable type: %v, %v; want empty entry", e, err)
	}
	if _, err := Decode([]byte{2, 1, 0, 0}); !errors.Is(err, ErrDecode) {
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
			"entry written by a newer raftset (format version 2, this binary reads up to 1)"},
		{"newer version, short", []byte{Version + 7}, Version + 7, true, "newer raftset (format version 8"},
		{"empty", nil, 0, false, "corrupt entry (format version 0): entry of 0 bytes"},
		{"version zero", []byte{0, 1, 0, 0}, 0, false, "corrupt entry (format version 0): unknown format version"},
		{"unknown type", []byte{Version, 5}, Version, false, "corrupt entry (format version 1): unknown entry type 5"},
		{"bad op kind", []byte{Version, byte(TypeBatch), 0, 1, 9, 0}, Version, false, "corrupt entry (format version 1): op kind at offset 5"},
		{"node, trailing", append(nodeEntry().Encode(nil), 0), Version, false, "trailing bytes"},
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
	f.Add([]byte{Version, byte(TypeBatch), 0, 0})
	f.Add(nodeEntry().Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		// What decodes must survive a re-encoding unchanged (the bytes may
		// differ: a varint can be written non-minimally).
		if e.Type == TypeBatch || e.Type == TypeNode {
			again, err := Decode(e.Encode(nil))
			if err != nil || !reflect.DeepEqual(again, e) {
				t.Fatalf("Decode(Encode(Decode(b))) = %v, %v", again, err)
			}
		}
	})
}
