package snapshot

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"raftset/internal/setenc"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.rdb")

var fixedCtime = time.Unix(1700000000, 0)

// randomKeyspace makes n keys over a few databases covering every encoding
// we write: strings in every RDB string form, intsets of each width,
// listpacks (also all-integer ones and ones with binary members), hashtables
// by count and by member length with their order shuffled by removals, and
// deadlines on about a third of the keys.
func randomKeyspace(rng *rand.Rand, n int) []entry {
	lim := setenc.DefaultLimits()
	var out []entry
	dbs := []int{0, 1, 7}
	seen := map[string]bool{}
	for i := range n {
		db := dbs[i*len(dbs)/n]
		var key string
		for key == "" || seen[strconv.Itoa(db)+key] {
			key = randomMember(rng)
		}
		seen[strconv.Itoa(db)+key] = true
		e := entry{db: db, key: key, expire: NoExpiry}
		if rng.IntN(3) == 0 {
			e.expire = rng.Int64N(1 << 42)
		}
		switch rng.IntN(6) {
		case 0:
			e.value = []byte(randomMember(rng))
		case 1: // intset of some width
			width := []int64{1 << 15, 1 << 31, 1 << 62}[rng.IntN(3)]
			ms := make([][]byte, 1+rng.IntN(40))
			for j := range ms {
				ms[j] = strconv.AppendInt(nil, rng.Int64N(width)*int64(1-2*rng.IntN(2)), 10)
			}
			e.set = setenc.NewForAdd(ms[0], len(ms), lim)
			e.set.AddMany(ms, lim)
		case 2, 3: // listpack
			ms := make([][]byte, 1+rng.IntN(lim.MaxListpackEntries))
			for j := range ms {
				ms[j] = []byte(randomShortMember(rng))
			}
			e.set = setenc.NewForAdd(ms[0], len(ms), lim)
			e.set.AddMany(ms, lim)
			if rng.IntN(4) == 0 { // intset made listpack by a string, which is then removed
				e.set = newSet([]string{"1", "2", "3"}, []string{"x"})
				e.set.Remove([]byte("x"))
			}
		case 4, 5: // hashtable, by size or by a long member, then shuffled by removals
			cnt := 1 + rng.IntN(300)
			ms := make([][]byte, cnt)
			for j := range ms {
				ms[j] = []byte(randomMember(rng))
			}
			if cnt <= lim.MaxListpackEntries {
				ms = append(ms, bytes.Repeat([]byte{0xFF, 0}, 40))
			}
			e.set = setenc.NewForAdd(ms[0], len(ms), lim)
			e.set.AddMany(ms, lim)
			for range rng.IntN(cnt/2 + 1) {
				e.set.Remove(ms[rng.IntN(len(ms)-1)])
			}
			if e.set.Len() == 0 {
				e.set.Add([]byte("last"), lim)
			}
		}
		if i%40 == 7 { // built under larger limits (a CONFIG SET since undone)
			big := setenc.Limits{MaxIntsetEntries: 2000, MaxListpackEntries: 300, MaxListpackValue: 200}
			ms := make([][]byte, 250+rng.IntN(750))
			strs := rng.IntN(2) == 0
			for j := range ms {
				if strs {
					ms[j] = fmt.Appendf(nil, "%0*d", 1+rng.IntN(150), j)
				} else {
					ms[j] = strconv.AppendInt(nil, int64(j)*int64(rng.IntN(1000)+1), 10)
				}
			}
			if strs {
				ms = ms[:250]
			}
			e.value, e.set = nil, setenc.NewForAdd(ms[0], len(ms), big)
			e.set.AddMany(ms, big)
		}
		out = append(out, e)
	}
	return out
}

// randomShortMember fits a listpack (<= 64 bytes).
func randomShortMember(rng *rand.Rand) string {
	for {
		if m := randomMember(rng); len(m) <= 64 {
			return m
		}
	}
}

// randomMember draws from every string form the writer distinguishes.
func randomMember(rng *rand.Rand) string {
	switch rng.IntN(10) {
	case 0:
		return strconv.FormatInt(rng.Int64N(256)-128, 10) // INT8
	case 1:
		return strconv.FormatInt(rng.Int64N(1<<16)-1<<15, 10) // INT16
	case 2:
		return strconv.FormatInt(rng.Int64N(1<<32)-1<<31, 10) // INT32
	case 3:
		return strconv.FormatInt(rng.Int64(), 10) // text integer
	case 4:
		return fmt.Sprintf("%012d", rng.IntN(200000)) // not an integer
	case 5: // binary, NUL and 0xFF
		b := make([]byte, rng.IntN(30))
		for i := range b {
			b[i] = []byte{0, 0xFF, 'a', byte(rng.IntN(256))}[rng.IntN(4)]
		}
		return string(b)
	case 6: // long and compressible: LZF
		return string(bytes.Repeat([]byte("ab\x00\xffcd"), 4+rng.IntN(400)))
	case 7: // long and random: raw
		b := make([]byte, 21+rng.IntN(100))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	case 8:
		return ""
	default:
		return "k" + strconv.Itoa(rng.IntN(1e6))
	}
}

// TestRoundTrip writes random keyspaces, reads them back equal (members,
// order, encodings, blobs, deadlines), and checks that writing what was read
// gives the same bytes again.
func TestRoundTrip(t *testing.T) {
	for seed := range uint64(8) {
		for _, compress := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d/compress=%v", seed, compress), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				entries := randomKeyspace(rng, 200)
				opt := WriterOptions{Compress: compress, Ctime: fixedCtime, UsedMem: 12345,
					Aux: []AuxField{{"raft-index", "42"}, {"raft-conf", "\x00binary\xff"}}}
				data := writeEntries(t, opt, entries)
				recs, r, err := readAll(data, ReaderOptions{})
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if !r.Exact() {
					t.Errorf("Exact() = false for our own file")
				}
				if err := diffRecords(recs, entries); err != nil {
					t.Fatal(err)
				}
				aux := r.Aux()
				if got := aux[len(aux)-1]; got != (AuxField{"raft-conf", "\x00binary\xff"}) {
					t.Errorf("last AUX = %q, want raft-conf", got)
				}
				again := writeEntries(t, opt, entriesOf(recs))
				if !bytes.Equal(again, data) {
					t.Errorf("rewrite of %d bytes differs (got %d bytes)", len(data), len(again))
				}
			})
		}
	}
}

// TestRoundTripVersion10 writes the Redis 7.0 export and reads it back as a
// foreign file: same members, deadlines and keys; listpack sets arrive as
// type-2 records and are rebuilt as Redis 7.0/7.2 would.
func TestRoundTripVersion10(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	entries := randomKeyspace(rng, 300)
	data := writeEntries(t, WriterOptions{Version: 10, Compress: true, Ctime: fixedCtime}, entries)
	if !bytes.HasPrefix(data, []byte("REDIS0010")) {
		t.Fatalf("header = %q, want REDIS0010", data[:9])
	}
	recs, r, err := readAll(data, ReaderOptions{})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if r.Exact() {
		t.Errorf("Exact() = true for a version-10 export")
	}
	if len(recs) != len(entries) {
		t.Fatalf("read %d records, want %d", len(recs), len(entries))
	}
	for i, rec := range recs {
		e := entries[i]
		if rec.RDBType == TypeSetListpack {
			t.Errorf("key %q: type 20 in a version-10 file", rec.Key)
		}
		if string(rec.Key) != e.key || rec.ExpireAtMs != e.expire || rec.DB != e.db {
			t.Errorf("record %d = %q/%d/%d, want %q/%d/%d", i, rec.Key, rec.ExpireAtMs, rec.DB, e.key, e.expire, e.db)
		}
		if e.set == nil {
			if !bytes.Equal(rec.Value, e.value) {
				t.Errorf("key %q value = %q, want %q", e.key, rec.Value, e.value)
			}
			continue
		}
		if got, want := sortedMembers(rec.Set), sortedMembers(e.set); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("key %q members = %q, want %q", e.key, got, want)
		}
	}
}

// goldenEntries is a small fixed keyspace with one of everything.
func goldenEntries() []entry {
	return []entry{
		{db: 0, key: "str:int", expire: NoExpiry, value: []byte("-12345")},
		{db: 0, key: "str:text", expire: 1893456000000, value: []byte("hello")},
		{db: 0, key: "str:lzf", expire: NoExpiry, value: bytes.Repeat([]byte("abcdefgh"), 20)},
		{db: 0, key: "str:bin", expire: NoExpiry, value: []byte("\x00\xff\x01")},
		{db: 0, key: "set:intset", expire: NoExpiry, set: newSet([]string{"1", "70000", "-5"})},
		{db: 0, key: "set:listpack", expire: 4102444800789, set: newSet([]string{"a", "b", "1", "000000123456"})},
		{db: 0, key: "set:hashtable", expire: NoExpiry, set: func() *setenc.Set {
			s := newSet([]string{"short", string(bytes.Repeat([]byte("C"), 65)), "12"})
			s.Remove([]byte("short"))
			s.Add([]byte("again"), setenc.DefaultLimits())
			return s
		}()},
		{db: 3, key: "12", expire: NoExpiry, value: []byte("in db 3")},
	}
}

func goldenOptions() WriterOptions {
	return WriterOptions{Compress: true, Ctime: fixedCtime, UsedMem: 1 << 20, RedisVer: "7.2.0",
		Aux: []AuxField{{"raft-index", "7"}, {"raft-term", "2"}}}
}

// TestGolden pins the bytes we write for a small keyspace. Run with -update
// after an intended format change, and commit the new file only when the
// diff is understood.
func TestGolden(t *testing.T) {
	got := writeEntries(t, goldenOptions(), goldenEntries())
	path := filepath.Join("testdata", "golden.rdb")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("written bytes differ from %s:\n got %x\nwant %x", path, got, want)
	}
	recs, _, err := readAll(want, ReaderOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if err := diffRecords(recs, goldenEntries()); err != nil {
		t.Error(err)
	}
}

// TestRoundTripKeepsOversizedEncodings: sets larger than the default limits
// allow (built while the limits were higher) come back in the same
// encoding from our own file, and converted as Redis would from a foreign
// one (a listpack over 128 members or an intset over 512 becomes a
// hashtable).
func TestRoundTripKeepsOversizedEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	var big []entry
	for _, e := range randomKeyspace(rng, 400) {
		if e.set != nil && e.set.Encoding() != setenc.Hashtable && e.set.Len() > 128 {
			big = append(big, e)
		}
	}
	if len(big) == 0 {
		t.Fatal("no oversized intset or listpack generated")
	}
	data := writeEntries(t, WriterOptions{Ctime: fixedCtime}, big)
	recs, _, err := readAll(data, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := diffRecords(recs, big); err != nil {
		t.Error(err)
	}
	bare := writeEntries(t, WriterOptions{Ctime: fixedCtime, BareAux: true}, big)
	recs, _, err = readAll(bare, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		want := setenc.Hashtable
		if big[i].set.Encoding() == setenc.Intset && r.Set.Len() <= 512 {
			want = setenc.Intset
		}
		if r.Set.Encoding() != want {
			t.Errorf("foreign key %q with %d members loaded as %v, want %v", r.Key, r.Set.Len(), r.Set.Encoding(), want)
		}
	}
}
