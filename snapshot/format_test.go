package snapshot

import (
	"bytes"
	"encoding/hex"
	"hash/crc64"
	"math/rand/v2"
	"strings"
	"testing"
)

const loremIpsum = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor " +
	"incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation " +
	"ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit " +
	"in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat " +
	"non proident, sunt in culpa qui officia deserunt mollit anim id est laborum."

func TestCRC64Vectors(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0},
		{"123456789", 0xe9c6d914c4b8d9ca},
		{loremIpsum + "\x00", 0xc7794709e69683b3},
		{loremIpsum, 0x912d89c65cd3c415},
	}
	for _, tc := range tests {
		if got := crc64Update(0, []byte(tc.in)); got != tc.want {
			t.Errorf("crc64Update(0, %.20q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

// TestCRC64MatchesStdlib checks the slicing loop against hash/crc64 with the
// inversions undone, in random pieces, so that incremental updates compose.
func TestCRC64MatchesStdlib(t *testing.T) {
	tab := crc64.MakeTable(crcPoly)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		p := make([]byte, rng.IntN(3000))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		want := ^crc64.Update(^uint64(0), tab, p)
		var got uint64
		for rest := p; len(rest) > 0; {
			k := min(len(rest), rng.IntN(40))
			got = crc64Update(got, rest[:k])
			rest = rest[k:]
		}
		if got != want {
			t.Fatalf("crc64Update over %d bytes in pieces = %#x, want %#x", len(p), got, want)
		}
	}
}

func TestLength(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "00"},
		{63, "3f"},
		{64, "4040"},
		{16383, "7fff"},
		{16384, "8000004000"},
		{1<<32 - 1, "80ffffffff"},
		{1 << 32, "810000000100000000"},
		{1<<64 - 1, "81ffffffffffffffff"},
	}
	for _, tc := range tests {
		b := appendLength(nil, tc.n)
		if got := hex.EncodeToString(b); got != tc.want {
			t.Errorf("appendLength(%d) = %s, want %s", tc.n, got, tc.want)
		}
		in := newInput(bytes.NewReader(b))
		got, special, err := in.readLength()
		if err != nil || special || got != tc.n {
			t.Errorf("readLength(%s) = %d, %v, %v, want %d", tc.want, got, special, err, tc.n)
		}
	}
	// 10xxxxxx other than 0x80/0x81 is not a length.
	in := newInput(bytes.NewReader([]byte{0x82, 0, 0, 0, 0}))
	if _, _, err := in.readLength(); !isCorrupt(err) {
		t.Errorf("readLength(82...) error = %v, want ErrCorrupt", err)
	}
}

func TestStringEncodings(t *testing.T) {
	long := strings.Repeat("abcdefgh", 10)
	tests := []struct {
		in       string
		compress bool
		want     string // hex of the encoded form
	}{
		{"", false, "00"},
		{"0", false, "c000"},
		{"-128", false, "c080"},
		{"127", false, "c07f"},
		{"128", false, "c18000"},
		{"-32768", false, "c10080"},
		{"32768", false, "c200800000"},
		{"2147483647", false, "c2ffffff7f"},
		{"-2147483648", false, "c200000080"},
		{"2147483648", false, "0a32313437343833363438"}, // beyond int32: text
		{"007", false, "03303037"},                      // not a strict integer
		{"+1", false, "022b31"},
		{"-0", false, "022d30"},
		{"12345678901", false, "0b3132333435363738393031"},               // 11 chars but > int32
		{strings.Repeat("a", 20), true, "14" + strings.Repeat("61", 20)}, // 20 bytes: never compressed
		{long, false, "4050" + hex.EncodeToString([]byte(long))},
	}
	for _, tc := range tests {
		w := &Writer{compress: tc.compress}
		w.writeString([]byte(tc.in))
		if got := hex.EncodeToString(w.buf); got != tc.want {
			t.Errorf("writeString(%q) = %s, want %s", tc.in, got, tc.want)
		}
		s := strings_(w.buf)
		for _, own := range []bool{false, true} {
			got, err := s.read("test", own)
			if err != nil || string(got) != tc.in {
				t.Errorf("read(%s, own=%v) = %q, %v, want %q", tc.want, own, got, err, tc.in)
			}
			s = strings_(w.buf)
		}
	}
	// A compressible long string is written as LZF and reads back.
	w := &Writer{compress: true}
	w.writeString([]byte(long))
	if w.buf[0] != 0xC3 {
		t.Fatalf("writeString(80 repetitive bytes) starts %#x, want 0xC3 (LZF)", w.buf[0])
	}
	if got, err := strings_(w.buf).read("test", false); err != nil || string(got) != long {
		t.Errorf("read(LZF) = %q, %v, want %q", got, err, long)
	}
}

func strings_(b []byte) *strDecoder { return &strDecoder{in: newInput(bytes.NewReader(b))} }

func TestLZFRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var c lzfCompressor
	inputs := [][]byte{
		[]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
		bytes.Repeat([]byte("000000123456"), 50),
		bytes.Repeat([]byte{0}, 100000),
		[]byte(loremIpsum),
	}
	for range 500 {
		n := rng.IntN(3000)
		p := make([]byte, n)
		alpha := 1 + rng.IntN(256)
		for i := range p {
			if i > 8 && rng.IntN(4) == 0 {
				p[i] = p[i-1-rng.IntN(8)]
			} else {
				p[i] = byte(rng.IntN(alpha))
			}
		}
		inputs = append(inputs, p)
	}
	for _, in := range inputs {
		out := make([]byte, len(in)+len(in)/16+64) // enough for any input
		n := c.compress(in, out)
		if len(in) > 0 && n == 0 {
			t.Fatalf("compress(%d bytes) with a generous budget failed", len(in))
		}
		dec := make([]byte, len(in))
		if err := lzfDecompress(out[:n], dec); err != nil || !bytes.Equal(dec, in) {
			t.Fatalf("decompress(compress(%d bytes)) = %v, round trip differs: %v", len(in), err, !bytes.Equal(dec, in))
		}
		// The budget is honoured exactly: every smaller budget fails.
		if n > 1 && c.compress(in, out[:n-1]) != 0 {
			t.Fatalf("compress(%d bytes) into %d bytes succeeded, but needs %d", len(in), n-1, n)
		}
	}
}

func TestLZFDecompressErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ulen int
	}{
		{"literal past input", "05616263", 6},
		{"literal past output", "0261626364", 2},
		{"backref before start", "0061" + "2001", 4},
		{"backref missing offset", "006120", 4},
		{"long backref missing length", "0061e0", 12},
		{"short output", "0161", 5},
		{"long output", "026161", 2},
	}
	for _, tc := range tests {
		in, _ := hex.DecodeString(tc.in)
		if err := lzfDecompress(in, make([]byte, tc.ulen)); err == nil {
			t.Errorf("lzfDecompress(%s) = nil, want an error (%s)", tc.in, tc.name)
		}
	}
}
