package command

import (
	"bytes"
	"errors"
	"reflect"
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
	if err != nil || len(e.Ops) != 0 {
		t.Errorf("ignorable type: %v, %v; want empty entry", e, err)
	}
	if _, err := Decode([]byte{2, 1, 0, 0}); !errors.Is(err, ErrDecode) {
		t.Errorf("future version: err = %v, want ErrDecode", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sampleEntry().Encode(nil))
	f.Add([]byte{Version, byte(TypeBatch), 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		// What decodes must survive a re-encoding unchanged (the bytes may
		// differ: a varint can be written non-minimally).
		if e.Type == TypeBatch {
			again, err := Decode(e.Encode(nil))
			if err != nil || !reflect.DeepEqual(again, e) {
				t.Fatalf("Decode(Encode(Decode(b))) = %v, %v", again, err)
			}
		}
	})
}
