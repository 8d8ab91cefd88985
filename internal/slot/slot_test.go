package slot

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// keyHashSlot is Redis's cluster.c function, transcribed loop for loop, as
// the reference Of is fuzzed against. Its CRC is the bitwise form of
// CRC-16/XMODEM, independent of the table Of uses.
func keyHashSlot(key []byte) int {
	s := 0
	for s = 0; s < len(key); s++ {
		if key[s] == '{' {
			break
		}
	}
	if s == len(key) {
		return int(bitwiseCRC16(key) & 0x3FFF)
	}
	e := 0
	for e = s + 1; e < len(key); e++ {
		if key[e] == '}' {
			break
		}
	}
	if e == len(key) || e == s+1 {
		return int(bitwiseCRC16(key) & 0x3FFF)
	}
	return int(bitwiseCRC16(key[s+1:e]) & 0x3FFF)
}

func bitwiseCRC16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{
		// Values from redis-server 7.0's CLUSTER KEYSLOT and the Redis
		// Cluster specification (CRC16 of "123456789" is 0x31C3).
		{"", 0},
		{"123456789", 0x31C3 & 0x3FFF},
		{"foo", 12182},
		{"a", 15495},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"user1000", 3443},
		// The first '{' and the first '}' after it decide the tag.
		{"foo{}{bar}", keyHashSlotOfWhole("foo{}{bar}")},
		{"foo{{bar}}zap", keyHashSlotOfWhole("{bar")},
		{"foo{bar}{zap}", keyHashSlotOfWhole("bar")},
		{"{", keyHashSlotOfWhole("{")},
		{"}{", keyHashSlotOfWhole("}{")},
	} {
		if got := Of([]byte(tc.key)); got != tc.want {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.want)
		}
		if got := keyHashSlot([]byte(tc.key)); got != tc.want {
			t.Errorf("keyHashSlot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

// keyHashSlotOfWhole hashes the whole key, ignoring braces.
func keyHashSlotOfWhole(key string) int { return int(bitwiseCRC16([]byte(key)) & 0x3FFF) }

func FuzzOf(f *testing.F) {
	for _, s := range []string{"", "foo", "{a}b", "a{}b", "{{}}", "x{y", "}{z}", "\xff{\x00}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		got, want := Of(key), keyHashSlot(key)
		if got != want || got < 0 || got >= Count {
			t.Fatalf("Of(%q) = %d, keyHashSlot = %d", key, got, want)
		}
	})
}

// TestOfMatchesRedis asks a cluster-enabled redis-server for the slot of
// random keys (with and without tags, binary bytes included) and compares.
func TestOfMatchesRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	r := testutil.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	c, err := testutil.DialRESP(r.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab{}\x00\xff{}xyz")
	keys := make([][]byte, 3000)
	for i := range keys {
		k := make([]byte, rng.IntN(12))
		for j := range k {
			if rng.IntN(3) == 0 {
				k[j] = byte(rng.IntN(256))
			} else {
				k[j] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		keys[i] = k
	}
	for _, k := range keys {
		if err := c.Send([][]byte{[]byte("CLUSTER"), []byte("KEYSLOT"), k}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		reply, err := c.Read()
		if err != nil {
			t.Fatal(err)
		}
		want := ":" + strconv.Itoa(Of(k)) + "\r\n"
		if reply != want {
			t.Errorf("CLUSTER KEYSLOT %q: redis %q, Of %q", k, reply, want)
		}
	}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(int) bool
		want [][2]int
	}{
		{"all", func(int) bool { return true }, [][2]int{{0, Count - 1}}},
		{"none", func(int) bool { return false }, nil},
		{"ends", func(s int) bool { return s == 0 || s == Count-1 }, [][2]int{{0, 0}, {Count - 1, Count - 1}}},
		{"halves", func(s int) bool { return s < 100 || (s >= 8192 && s < 8200) },
			[][2]int{{0, 99}, {8192, 8199}}},
	} {
		got := Ranges(tc.set)
		if !equalRanges(got, tc.want) {
			t.Errorf("%s: Ranges = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func equalRanges(a, b [][2]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkOf(b *testing.B) {
	key := bytes.Repeat([]byte("k"), 32)
	for b.Loop() {
		_ = Of(key)
	}
}
