package setenc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func seq(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s%d", prefix, i)
	}
	return out
}

// sadd does what one SADD command does to a possibly missing key.
func sadd(s *Set, lim Limits, members ...[]byte) (*Set, int) {
	if s == nil {
		s = NewForAdd(members[0], len(members), lim)
	}
	return s, s.AddMany(members, lim)
}

func sortedStrings(ms [][]byte) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m)
	}
	slices.Sort(out)
	return out
}

func assertEncoding(t *testing.T, s *Set, want Encoding) {
	t.Helper()
	if got := s.Encoding(); got != want {
		t.Fatalf("Encoding() = %v, want %v", got, want)
	}
}

// TestConversions pins Redis 7.2's conversion rules (redis-spec.md §4.3 and
// redis/redis tests/unit/type/set.tcl).
func TestConversions(t *testing.T) {
	lim := DefaultLimits()
	long64 := bytes.Repeat([]byte("a"), 64)
	long65 := bytes.Repeat([]byte("a"), 65)
	for _, tc := range []struct {
		name  string
		sadds [][][]byte
		want  Encoding
		card  int
	}{
		{"integers make an intset", [][][]byte{bs("1", "2", "-3")}, Intset, 3},
		{"non-canonical integers are strings", [][][]byte{bs("01")}, Listpack, 1},
		{"plus sign is a string", [][][]byte{bs("+1")}, Listpack, 1},
		{"seed benchmark member is a string", [][][]byte{bs("000000123456")}, Listpack, 1},
		{"int64 overflow is a string", [][][]byte{bs("18446744073709551616")}, Listpack, 1},
		{"string added to intset gives listpack", [][][]byte{bs("1", "2"), bs("a")}, Listpack, 3},
		{"512 integers stay intset", [][][]byte{seq("", 512)}, Intset, 512},
		{"513th integer gives hashtable", [][][]byte{seq("", 512), bs("100000")}, Hashtable, 513},
		{"513 integers in one SADD give hashtable", [][][]byte{seq("", 513)}, Hashtable, 513},
		{"128 strings stay listpack", [][][]byte{seq("m", 128)}, Listpack, 128},
		{"129th string gives hashtable", [][][]byte{seq("m", 128), bs("x")}, Hashtable, 129},
		{"64-byte member fits listpack", [][][]byte{{long64}}, Listpack, 1},
		{"65-byte member gives hashtable", [][][]byte{bs("a"), {long65}}, Hashtable, 2},
		{"65-byte member on new key gives hashtable", [][][]byte{{long65}}, Hashtable, 1},
		{"intset of 128 plus string gives hashtable", [][][]byte{seq("", 128), bs("x")}, Hashtable, 129},
		{"intset of 127 plus string gives listpack", [][][]byte{seq("", 127), bs("x")}, Listpack, 128},
		{"long string on intset gives hashtable", [][][]byte{bs("1"), {long65}}, Hashtable, 2},
		{"129 duplicate args convert a listpack", [][][]byte{bs("a"), slices.Repeat(bs("a"), 129)}, Hashtable, 1},
		{"129 copies of one string on a new key", [][][]byte{slices.Repeat(bs("a"), 129)}, Hashtable, 1},
		{"129 copies of one integer on a new key", [][][]byte{slices.Repeat(bs("7"), 129)}, Intset, 1},
		{"513 duplicate args convert an intset", [][][]byte{bs("1"), slices.Repeat(bs("1"), 513)}, Hashtable, 1},
		{"integer added to listpack stays listpack", [][][]byte{bs("a"), bs("5")}, Listpack, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *Set
			for _, args := range tc.sadds {
				s, _ = sadd(s, lim, args...)
			}
			assertEncoding(t, s, tc.want)
			if s.Len() != tc.card {
				t.Errorf("Len() = %d, want %d", s.Len(), tc.card)
			}
		})
	}
}

func TestIntsetWithWideExtremesSkipsListpack(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxListpackValue = 5 // "100000" has 6 digits
	s, _ := sadd(nil, lim, bs("1", "100000")...)
	s.Add([]byte("x"), lim)
	assertEncoding(t, s, Hashtable)
}

func TestRemoveNeverConverts(t *testing.T) {
	lim := DefaultLimits()
	s, _ := sadd(nil, lim, seq("m", 200)...)
	assertEncoding(t, s, Hashtable)
	for _, m := range seq("m", 199) {
		if !s.Remove(m) {
			t.Fatalf("Remove(%q) = false, want true", m)
		}
	}
	assertEncoding(t, s, Hashtable)
	if got := s.Members(); len(got) != 1 || string(got[0]) != "m199" {
		t.Errorf("Members() = %q, want [m199]", got)
	}
}

// newInEncoding builds a set holding members in the requested encoding.
func newInEncoding(t *testing.T, enc Encoding, members [][]byte) *Set {
	t.Helper()
	s := buildInEncoding(enc, members)
	assertEncoding(t, s, enc)
	return s
}

// buildInEncoding starts a set in enc (a hashtable by a large size hint) and
// adds members to it.
func buildInEncoding(enc Encoding, members [][]byte) *Set {
	lim := DefaultLimits()
	var s *Set
	switch enc {
	case Intset:
		s = newIntset()
	case Listpack:
		s = newListpack()
	default:
		s = NewForAdd([]byte("x"), 100000, lim)
	}
	for _, m := range members {
		s.Add(m, lim)
	}
	return s
}

// TestBehaviourEveryEncoding runs one table of operations against a set in
// each encoding: callers must not be able to tell them apart.
func TestBehaviourEveryEncoding(t *testing.T) {
	for _, enc := range []Encoding{Intset, Listpack, Hashtable} {
		t.Run(enc.String(), func(t *testing.T) {
			s := newInEncoding(t, enc, bs("3", "1", "2", "-7", "9223372036854775807"))
			lim := DefaultLimits()
			if s.Len() != 5 {
				t.Fatalf("Len() = %d, want 5", s.Len())
			}
			for _, tc := range []struct {
				m    string
				want bool
			}{{"1", true}, {"-7", true}, {"01", false}, {"+1", false}, {"4", false}, {"9223372036854775807", true}, {"", false}} {
				if got := s.Contains([]byte(tc.m)); got != tc.want {
					t.Errorf("Contains(%q) = %v, want %v", tc.m, got, tc.want)
				}
			}
			if s.Add([]byte("2"), lim) {
				t.Errorf("Add(existing 2) = true, want false")
			}
			if s.Remove([]byte("02")) {
				t.Errorf("Remove(02) = true, want false")
			}
			if !s.Remove([]byte("2")) || s.Contains([]byte("2")) {
				t.Errorf("Remove(2) did not remove")
			}
			got := sortedStrings(s.Members())
			want := []string{"-7", "1", "3", "9223372036854775807"}
			if !slices.Equal(got, want) {
				t.Errorf("Members() = %q, want %q", got, want)
			}
			scanned := []string{}
			cursor := uint64(0)
			for {
				cursor = s.Scan(cursor, 1, func(m []byte) { scanned = append(scanned, string(m)) })
				if cursor == 0 {
					break
				}
			}
			if slices.Sort(scanned); !slices.Equal(scanned, want) {
				t.Errorf("Scan = %q, want %q", scanned, want)
			}
			src := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 50; i++ {
				if m := s.RandomMember(src); !s.Contains(m) {
					t.Fatalf("RandomMember() = %q, not a member", m)
				}
			}
			two := s.RandomMembers(src, 2)
			if len(two) != 2 || bytes.Equal(two[0], two[1]) || !s.Contains(two[0]) || !s.Contains(two[1]) {
				t.Errorf("RandomMembers(2) = %q, want two distinct members", two)
			}
			if all := s.RandomMembers(src, 10); len(all) != 4 {
				t.Errorf("RandomMembers(10) returned %d members, want 4", len(all))
			}
			n := 0
			s.RandomMembersWithRepeats(src, 100, func(m []byte) {
				if !s.Contains(m) {
					t.Fatalf("RandomMembersWithRepeats gave %q, not a member", m)
				}
				n++
			})
			if n != 100 {
				t.Errorf("RandomMembersWithRepeats(100) called fn %d times", n)
			}
			c := s.Clone()
			p := s.Pop(src)
			if s.Contains(p) || !c.Contains(p) || s.Len() != 3 || c.Len() != 4 {
				t.Errorf("Pop() = %q: set %d members, clone %d", p, s.Len(), c.Len())
			}
			if s.Encoding() != enc {
				t.Errorf("Pop changed encoding to %v", s.Encoding())
			}
		})
	}
}

// model is an independent statement of Redis's encoding rules over a plain
// map, for the differential test.
type model struct {
	members map[string]bool
	enc     Encoding
	maxLen  int
}

func (md *model) isInt(m string) bool {
	v, err := strconv.ParseInt(m, 10, 64)
	return err == nil && strconv.FormatInt(v, 10) == m
}

func (md *model) sadd(lim Limits, args []string) int {
	if md.members == nil || len(md.members) == 0 {
		md.members = map[string]bool{}
		switch {
		case md.isInt(args[0]) && len(args) <= lim.MaxIntsetEntries:
			md.enc = Intset
		case len(args) <= lim.MaxListpackEntries:
			md.enc = Listpack
		default:
			md.enc = Hashtable
		}
	} else if (md.enc == Listpack && len(args) > lim.MaxListpackEntries) || (md.enc == Intset && len(args) > lim.MaxIntsetEntries) {
		md.enc = Hashtable
	}
	added := 0
	for _, m := range args {
		if md.members[m] {
			continue
		}
		switch md.enc {
		case Intset:
			if md.isInt(m) {
				if len(md.members)+1 > lim.MaxIntsetEntries {
					md.enc = Hashtable
				}
			} else {
				widest := 0
				for k := range md.members {
					widest = max(widest, len(k))
				}
				if len(md.members) < lim.MaxListpackEntries && len(m) <= lim.MaxListpackValue && widest <= lim.MaxListpackValue {
					md.enc = Listpack
				} else {
					md.enc = Hashtable
				}
			}
		case Listpack:
			if len(md.members) >= lim.MaxListpackEntries || len(m) > lim.MaxListpackValue {
				md.enc = Hashtable
			}
		}
		md.members[m] = true
		added++
	}
	return added
}

// TestDifferentialAgainstMap applies random SADD/SREM/SPOP streams to Sets and
// to the model, checking members and encoding name after every operation.
func TestDifferentialAgainstMap(t *testing.T) {
	lim := Limits{MaxIntsetEntries: 40, MaxListpackEntries: 20, MaxListpackValue: 8}
	r := rand.New(rand.NewPCG(42, 42))
	src := rand.New(rand.NewPCG(1, 1))
	genMember := func() string {
		switch r.IntN(6) {
		case 0, 1, 2:
			return strconv.Itoa(r.IntN(60) - 10)
		case 3:
			return fmt.Sprintf("s%d", r.IntN(30))
		case 4:
			return strings9(r)
		default:
			return string([]byte{0, byte(r.IntN(3)), 0xff})
		}
	}
	var s *Set
	md := &model{}
	ops := 0
	for ops < 150000 {
		ops++
		switch op := r.IntN(10); {
		case op < 6:
			n := 1 + r.IntN(4)
			if r.IntN(50) == 0 {
				n = 1 + r.IntN(60)
			}
			args := make([]string, n)
			for i := range args {
				args[i] = genMember()
			}
			want := md.sadd(lim, args)
			var got int
			s, got = sadd(s, lim, bs(args...)...)
			if got != want {
				t.Fatalf("op %d: SADD %q = %d, want %d", ops, args, got, want)
			}
		case op < 9:
			if s == nil {
				continue
			}
			m := genMember()
			want := md.members[m]
			if got := s.Remove([]byte(m)); got != want {
				t.Fatalf("op %d: SREM %q = %v, want %v", ops, m, got, want)
			}
			delete(md.members, m)
		default:
			if s == nil {
				continue
			}
			p := s.Pop(src)
			if !md.members[string(p)] {
				t.Fatalf("op %d: SPOP = %q, not a member", ops, p)
			}
			delete(md.members, string(p))
		}
		if s != nil && s.Len() == 0 {
			s = nil // the key is deleted
		}
		if s == nil {
			if len(md.members) != 0 {
				t.Fatalf("op %d: set empty, model has %d", ops, len(md.members))
			}
			continue
		}
		if s.Encoding() != md.enc {
			t.Fatalf("op %d: Encoding() = %v, want %v", ops, s.Encoding(), md.enc)
		}
		if s.Len() != len(md.members) {
			t.Fatalf("op %d: Len() = %d, want %d", ops, s.Len(), len(md.members))
		}
		if ops%50 == 0 {
			for _, m := range s.Members() {
				if !md.members[string(m)] {
					t.Fatalf("op %d: member %q not in model", ops, m)
				}
			}
		}
	}
}

func strings9(r *rand.Rand) string {
	b := make([]byte, 5+r.IntN(6)) // 5..10 bytes: crosses MaxListpackValue 8
	for i := range b {
		b[i] = 'a' + byte(r.IntN(3))
	}
	return string(b)
}

// roundTrip serialises a set the way a snapshot does and reads it back
// exactly.
func roundTrip(t *testing.T, s *Set) *Set {
	t.Helper()
	var out *Set
	var err error
	switch s.Encoding() {
	case Intset:
		out, err = FromIntset(bytes.Clone(s.Blob()), DefaultLimits(), Exact)
	case Listpack:
		out, err = FromListpack(bytes.Clone(s.Blob()), DefaultLimits(), Exact)
	default:
		l := NewLoader(s.Len(), DefaultLimits(), Exact)
		s.Iterate(func(m []byte) bool {
			if err == nil {
				err = l.Add(m)
			}
			return true
		})
		if err == nil {
			out, err = l.Set()
		}
	}
	if err != nil {
		t.Fatalf("round trip of %v set: %v", s.Encoding(), err)
	}
	return out
}

// TestDeterminismAcrossSnapshot feeds two sets the same operations and seeds;
// one of them is serialised and read back half way. Their pops and scans must
// stay identical.
func TestDeterminismAcrossSnapshot(t *testing.T) {
	lim := DefaultLimits()
	for _, tc := range []struct {
		name string
		gen  func(r *rand.Rand) []byte
	}{
		{"intset", func(r *rand.Rand) []byte { return fmt.Appendf(nil, "%d", r.IntN(400)) }},
		{"listpack", func(r *rand.Rand) []byte { return fmt.Appendf(nil, "%012d", r.IntN(100)) }},
		{"hashtable", func(r *rand.Rand) []byte { return fmt.Appendf(nil, "%012d", r.IntN(5000)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			a, _ := sadd(nil, lim, tc.gen(r))
			b := a.Clone()
			for i := 0; i < 20000; i++ {
				if i == 10000 {
					b = roundTrip(t, b)
				}
				src1 := rand.NewPCG(uint64(i), 1)
				src2 := rand.NewPCG(uint64(i), 1)
				switch r.IntN(5) {
				case 0, 1, 2:
					m := tc.gen(r)
					a.Add(m, lim)
					b.Add(m, lim)
				case 3:
					if a.Len() > 1 {
						pa, pb := a.Pop(src1), b.Pop(src2)
						if !bytes.Equal(pa, pb) {
							t.Fatalf("step %d: Pop = %q and %q", i, pa, pb)
						}
					}
				default:
					if a.Len() > 10 {
						n := 1 + r.IntN(a.Len()-1)
						pa, pb := a.PopN(src1, n, lim), b.PopN(src2, n, lim)
						if !slices.EqualFunc(pa, pb, bytes.Equal) {
							t.Fatalf("step %d: PopN(%d) differ", i, n)
						}
					}
				}
				if a.Encoding() != b.Encoding() {
					t.Fatalf("step %d: encodings %v and %v", i, a.Encoding(), b.Encoding())
				}
			}
			if !slices.EqualFunc(scanAll(a, 7), scanAll(b, 7), bytes.Equal) {
				t.Fatalf("scan outputs differ")
			}
		})
	}
}

func scanAll(s *Set, count int) [][]byte {
	var out [][]byte
	cursor := uint64(0)
	for {
		cursor = s.Scan(cursor, count, func(m []byte) { out = append(out, bytes.Clone(m)) })
		if cursor == 0 {
			return out
		}
	}
}

func TestPopN(t *testing.T) {
	lim := DefaultLimits()
	for _, tc := range []struct {
		name    string
		members [][]byte
		count   int
		wantEnc Encoding
	}{
		{"listpack few", seq("m", 100), 10, Listpack},
		{"listpack most", seq("m", 100), 95, Listpack},
		{"intset few", seq("", 100), 10, Intset},
		{"intset most", seq("", 100), 95, Intset},
		{"hashtable few", seq("m", 300), 10, Hashtable},
		{"hashtable most becomes listpack", seq("m", 300), 290, Listpack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := sadd(nil, lim, tc.members...)
			before := sortedStrings(s.Members())
			src := rand.New(rand.NewPCG(3, 3))
			popped := s.PopN(src, tc.count, lim)
			if len(popped) != tc.count || s.Len() != len(tc.members)-tc.count {
				t.Fatalf("PopN(%d) returned %d, left %d", tc.count, len(popped), s.Len())
			}
			assertEncoding(t, s, tc.wantEnc)
			all := sortedStrings(append(popped, s.Members()...))
			if !slices.Equal(all, before) {
				t.Errorf("popped + remaining != original")
			}
		})
	}
}

func TestStoreEncodings(t *testing.T) {
	lim := DefaultLimits()
	mk := func(ms ...[]byte) *Set { s, _ := sadd(nil, lim, ms...); return s }
	lpA := mk(bs("1", "2", "3", "a")...)
	lpB := mk(bs("2", "3", "4", "b")...)
	htA := mk(append(seq("", 129), seq("x", 129)...)...)
	htB := mk(append(seq("", 129), seq("y", 129)...)...)
	for _, tc := range []struct {
		name string
		got  *Set
		enc  Encoding
		card int
	}{
		{"SINTERSTORE of listpacks with integer result is intset", Inter([]*Set{lpA, lpB}, lim), Intset, 2},
		{"SINTERSTORE of hashtables sharing 129 integers is intset", Inter([]*Set{htA, htB}, lim), Intset, 129},
		{"SINTERSTORE of listpacks with string result", Inter([]*Set{lpA, mk(bs("a", "b")...)}, lim), Listpack, 1},
		{"SUNIONSTORE of intsets is intset", Union([]*Set{mk(bs("1")...), mk(bs("2")...)}, lim), Intset, 2},
		{"SUNIONSTORE mixed is listpack", Union([]*Set{lpA, lpB}, lim), Listpack, 6},
		{"SUNIONSTORE large is hashtable", Union([]*Set{htA, lpA}, lim), Hashtable, 259},
		{"SDIFFSTORE integers is intset", Diff([]*Set{lpA, mk(bs("a")...)}, lim), Intset, 3},
		{"SDIFFSTORE with missing keys", Diff([]*Set{lpA, nil}, lim), Listpack, 4},
		{"SDIFFSTORE of a set with itself is empty", Diff([]*Set{lpA, lpA}, lim), Intset, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got.Len() != tc.card {
				t.Fatalf("Len() = %d, want %d", tc.got.Len(), tc.card)
			}
			assertEncoding(t, tc.got, tc.enc)
		})
	}
}

func TestLoadAsRedis(t *testing.T) {
	lim := DefaultLimits()
	load := func(members [][]byte) (*Set, error) {
		l := NewLoader(len(members), lim, AsRedis)
		for _, m := range members {
			if err := l.Add(m); err != nil {
				return nil, err
			}
		}
		return l.Set()
	}
	for _, tc := range []struct {
		name    string
		members [][]byte
		enc     Encoding
	}{
		{"small hashtable record of integers becomes intset", seq("", 10), Intset},
		{"small mixed record becomes listpack", bs("1", "a"), Listpack},
		{"129 strings stay hashtable", seq("m", 129), Hashtable},
		{"513 integers stay hashtable", seq("", 513), Hashtable},
		{"long member gives hashtable", [][]byte{bytes.Repeat([]byte("z"), 65)}, Hashtable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := load(tc.members)
			if err != nil {
				t.Fatal(err)
			}
			assertEncoding(t, s, tc.enc)
			if s.Len() != len(tc.members) {
				t.Errorf("Len() = %d, want %d", s.Len(), len(tc.members))
			}
		})
	}
	for _, dup := range [][][]byte{bs("1", "1"), bs("a", "a"), append(seq("m", 200), []byte("m5"))} {
		if _, err := load(dup); err == nil {
			t.Errorf("loading %d members with a duplicate succeeded", len(dup))
		}
	}
	if _, err := load(nil); err != ErrEmpty {
		t.Errorf("loading no members: err = %v, want ErrEmpty", err)
	}
	// Over-limit compact records convert on load, unless loading exactly.
	big := NewForAdd([]byte("a"), 1, Limits{MaxIntsetEntries: 512, MaxListpackEntries: 1000, MaxListpackValue: 64})
	big.AddMany(seq("m", 200), Limits{MaxIntsetEntries: 512, MaxListpackEntries: 1000, MaxListpackValue: 64})
	if s, err := FromListpack(bytes.Clone(big.Blob()), lim, AsRedis); err != nil || s.Encoding() != Hashtable {
		t.Errorf("FromListpack(200 members, AsRedis) = %v, %v; want hashtable", s.Encoding(), err)
	}
	if s, err := FromListpack(bytes.Clone(big.Blob()), lim, Exact); err != nil || s.Encoding() != Listpack {
		t.Errorf("FromListpack(200 members, Exact) = %v, %v; want listpack", s.Encoding(), err)
	}
}

// A set moved into a shared slab keeps its members, and growing or
// shrinking it never touches the bytes around it.
func TestMoveBlobStaysInItsBytes(t *testing.T) {
	lim := DefaultLimits()
	for _, first := range [][]byte{[]byte("1"), []byte("m")} {
		s, _ := sadd(nil, lim, append([][]byte{first}, seq(string(first), 20)...)...)
		want := sortedStrings(s.Members())
		slab := bytes.Repeat([]byte{0xAA}, 3*len(s.Blob()))
		dst := slab[len(s.Blob()) : 2*len(s.Blob())]
		copy(dst, s.Blob())
		s.MoveBlob(dst)
		if got := sortedStrings(s.Members()); !slices.Equal(got, want) {
			t.Fatalf("%s: members after move = %v, want %v", s.Encoding(), got, want)
		}
		s.Remove(first)
		s.Add([]byte(string(first)+"x"), lim)
		s.Add(first, lim)
		for i, b := range slab {
			if (i < len(dst) || i >= 2*len(dst)) && b != 0xAA {
				t.Fatalf("%s: byte %d beside the moved blob changed", s.Encoding(), i)
			}
		}
		if !s.Contains(first) || s.Len() != len(want)+1 {
			t.Fatalf("%s: after changes: len %d", s.Encoding(), s.Len())
		}
	}
}

// TestPopAppend checks that PopAppend picks what Pop picks from the same
// source, in every encoding, and appends it after dst's bytes: the state
// machine's SPOP uses it with a reused buffer, and replicas must agree.
func TestPopAppend(t *testing.T) {
	lim := DefaultLimits()
	for _, tc := range []struct {
		name    string
		members [][]byte
	}{
		{"intset", seq("", 100)},
		{"listpack", seq("m", 100)},
		{"hashtable", seq("m", 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := sadd(nil, lim, tc.members...)
			b, _ := sadd(nil, lim, tc.members...)
			srcA, srcB := rand.New(rand.NewPCG(7, 8)), rand.New(rand.NewPCG(7, 8))
			buf := []byte("prefix")
			for a.Len() > 0 {
				want := a.Pop(srcA)
				buf = b.PopAppend(buf[:len("prefix")], srcB)
				if got := buf[len("prefix"):]; !bytes.Equal(got, want) || string(buf[:len("prefix")]) != "prefix" {
					t.Fatalf("PopAppend(%q) = %q, want prefix then Pop's %q", "prefix", buf, want)
				}
				if a.Len() != b.Len() {
					t.Fatalf("Len after PopAppend = %d, want %d", b.Len(), a.Len())
				}
			}
		})
	}
}
