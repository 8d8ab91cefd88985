package snapshot

import (
	"errors"
	"testing"

	"raftset/internal/setenc"
)

// TestDumpPayloads checks payloads against redis-server 7.0's DUMP of the
// same values, and Undump's errors.
func TestDumpPayloads(t *testing.T) {
	// redis-cli: SET cs v; DUMP cs. SADD cset 1 2 3; DUMP cset.
	str := "\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce"
	if got := string(Dump([]byte("v"), nil)); got != str {
		t.Errorf("Dump(v) = %q, redis %q", got, str)
	}
	set := setenc.NewForAdd([]byte("1"), 3, setenc.DefaultLimits())
	set.AddMany([][]byte{[]byte("1"), []byte("2"), []byte("3")}, setenc.DefaultLimits())
	intset := "\v\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\\xe2mnM\x1b"
	if got := string(Dump(nil, set)); got != intset {
		t.Errorf("Dump(intset) = %q, redis %q", got, intset)
	}
	for _, p := range []string{str, intset} {
		rec, err := Undump([]byte(p), setenc.Limits{})
		if err != nil {
			t.Fatalf("Undump(%q): %v", p, err)
		}
		if got := string(Dump(rec.Value, rec.Set)); got != p {
			t.Errorf("Dump(Undump(%q)) = %q", p, got)
		}
	}
	bad := []byte(str)
	bad[len(bad)-1] ^= 1
	newer := []byte(str)
	newer[len(newer)-10] = maxReadVersion + 1
	for _, p := range [][]byte{nil, []byte("short"), bad, newer} {
		if _, err := Undump(p, setenc.Limits{}); !errors.Is(err, ErrDumpPayload) {
			t.Errorf("Undump(%q) = %v, want ErrDumpPayload", p, err)
		}
	}
	// A list (type 18) is well formed but not a value raftset holds.
	list := []byte{TypeListQuicklist2, 0}
	list = append(list, 10, 0)
	list = append(list, le64(crc64Update(0, list))...)
	var ute *UnsupportedTypeError
	if _, err := Undump(list, setenc.Limits{}); !errors.As(err, &ute) || ute.Type != TypeListQuicklist2 {
		t.Errorf("Undump(list) = %v, want UnsupportedTypeError", err)
	}
}

func le64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}
