package listpack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"

	"raftset/internal/alloc"
)

func TestNew(t *testing.T) {
	if got, want := New(), hx("07 00 00 00 00 00 FF"); !bytes.Equal(got, want) {
		t.Errorf("New() = % X, want % X", got, want)
	}
	if got, want := Len(New()), 0; got != want {
		t.Errorf("Len(New()) = %d, want %d", got, want)
	}
	for _, b := range [][]byte{nil, New()} {
		if got := First(b); got != -1 {
			t.Errorf("First(% X) = %d, want -1", b, got)
		}
		if got := Last(b); got != -1 {
			t.Errorf("Last(% X) = %d, want -1", b, got)
		}
		if got := Find(b, []byte("a")); got != -1 {
			t.Errorf("Find(% X, \"a\") = %d, want -1", b, got)
		}
		if got := Seek(b, 0); got != -1 {
			t.Errorf("Seek(% X, 0) = %d, want -1", b, got)
		}
	}
	if got, want := Append(nil, []byte("a")), hx("0A 00 00 00 01 00 81 61 02 FF"); !bytes.Equal(got, want) {
		t.Errorf("Append(nil, \"a\") = % X, want % X", got, want)
	}
}

// TestAppendEntryBytes checks the entry (encoding+data+backlen) Append
// writes for one member: bytes worked out by hand from Redis's
// src/listpack.c for each encoding, plus the string-encoding and backlen
// size boundaries.
func TestAppendEntryBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		member []byte
		want   []byte
	}{
		{"a", []byte("a"), hx("81 61 02")},
		{"1", []byte("1"), hx("01 01")},
		{"-1", []byte("-1"), hx("DF FF 02")},
		{"300", []byte("300"), hx("C1 2C 02")},
		{"hello", []byte("hello"), hx("85 68 65 6C 6C 6F 06")},
		{"007", []byte("007"), hx("83 30 30 37 04")},
		{"100000", []byte("100000"), hx("F2 A0 86 01 04")},
		{"-100000", []byte("-100000"), hx("F2 60 79 FE 04")},
		{"int64 max", []byte("9223372036854775807"), hx("F4 FF FF FF FF FF FF FF 7F 09")},
		{"empty string", []byte(""), hx("80 01")},
		{"63 bytes, 6-bit string", rep("y", 63), cat(hx("BF"), rep("y", 63), hx("40"))},
		{"64 x", rep("x", 64), cat(hx("E0 40"), rep("x", 64), hx("42"))},
		{"200-byte string", rep("s", 200), cat(hx("E0 C8"), rep("s", 200), hx("01 CA"))},
		// backlen edges: L = encoding+data size.
		{"L=127 (1-byte backlen)", rep("z", 125), cat(hx("E0 7D"), rep("z", 125), hx("7F"))},
		{"L=128 (2-byte backlen)", rep("z", 126), cat(hx("E0 7E"), rep("z", 126), hx("01 80"))},
		{"4095 bytes, last 12-bit string", rep("q", 4095), cat(hx("EF FF"), rep("q", 4095), hx("20 81"))},
		{"4096 bytes, first 32-bit string", rep("q", 4096), cat(hx("F0 00 10 00 00"), rep("q", 4096), hx("20 85"))},
		{"L=16382 (2-byte backlen)", rep("w", 16377), cat(hx("F0 F9 3F 00 00"), rep("w", 16377), hx("7F FE"))},
		{"L=16383 (3-byte backlen, Redis's <)", rep("w", 16378), cat(hx("F0 FA 3F 00 00"), rep("w", 16378), hx("00 FF FF"))},
	} {
		b := Append(New(), tc.member)
		if got := b[HeaderSize : len(b)-1]; !bytes.Equal(got, tc.want) {
			t.Errorf("Append(%s) entry = % X, want % X", tc.name, trunc(got), trunc(tc.want))
		}
		if got, want := EntrySize(tc.member), len(tc.want); got != want {
			t.Errorf("EntrySize(%s) = %d, want %d", tc.name, got, want)
		}
		if got, want := Bytes(b), len(b); got != want {
			t.Errorf("Bytes(Append(%s)) = %d, want %d", tc.name, got, want)
		}
		if got, want := Len(b), 1; got != want {
			t.Errorf("Len(Append(%s)) = %d, want %d", tc.name, got, want)
		}
		if err := ValidateSet(b); err != nil {
			t.Errorf("ValidateSet(Append(%s)) = %v, want nil", tc.name, err)
		}
		if got := AppendMember(nil, b, First(b)); !bytes.Equal(got, tc.member) {
			t.Errorf("AppendMember(Append(%s)) = %q, want %q", tc.name, trunc(got), trunc(tc.member))
		}
		if got, want := Last(b), HeaderSize; got != want {
			t.Errorf("Last(Append(%s)) = %d, want %d", tc.name, got, want)
		}
	}
}

func trunc(b []byte) []byte {
	if len(b) > 24 {
		return append(append(b[:12:12], "..."...), b[len(b)-8:]...)
	}
	return b
}

func TestAppendIntegerBoundaries(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want string
	}{
		{0, "00 01"},
		{127, "7F 01"},
		{128, "C0 80 02"},
		{-1, "DF FF 02"},
		{-4096, "D0 00 02"},
		{4095, "CF FF 02"},
		{4096, "F1 00 10 03"},
		{-4097, "F1 FF EF 03"},
		{32767, "F1 FF 7F 03"},
		{-32768, "F1 00 80 03"},
		{32768, "F2 00 80 00 04"},
		{-32769, "F2 FF 7F FF 04"},
		{8388607, "F2 FF FF 7F 04"},
		{-8388608, "F2 00 00 80 04"},
		{8388608, "F3 00 00 80 00 05"},
		{-8388609, "F3 FF FF 7F FF 05"},
		{math.MaxInt32, "F3 FF FF FF 7F 05"},
		{math.MinInt32, "F3 00 00 00 80 05"},
		{math.MaxInt32 + 1, "F4 00 00 00 80 00 00 00 00 09"},
		{math.MinInt32 - 1, "F4 FF FF FF 7F FF FF FF FF 09"},
		{math.MaxInt64, "F4 FF FF FF FF FF FF FF 7F 09"},
		{math.MinInt64, "F4 00 00 00 00 00 00 00 80 09"},
	} {
		want := hx(tc.want)
		s := []byte(strconv.FormatInt(tc.v, 10))
		for name, b := range map[string][]byte{
			"Append":    Append(New(), s),
			"AppendInt": AppendInt(New(), tc.v),
		} {
			if got := b[HeaderSize : len(b)-1]; !bytes.Equal(got, want) {
				t.Errorf("%s(%d) entry = % X, want % X", name, tc.v, got, want)
			}
			if _, v, isInt := Get(b, HeaderSize); !isInt || v != tc.v {
				t.Errorf("Get(%s(%d)) = %d, %v, want %d, true", name, tc.v, v, isInt, tc.v)
			}
			if got := AppendMember(nil, b, HeaderSize); !bytes.Equal(got, s) {
				t.Errorf("AppendMember(%s(%d)) = %q, want %q", name, tc.v, got, s)
			}
			if got, want := Find(b, s), HeaderSize; got != want {
				t.Errorf("Find(%q) = %d, want %d", s, got, want)
			}
			if err := Validate(b, true); err != nil {
				t.Errorf("Validate(%s(%d)) = %v, want nil", name, tc.v, err)
			}
		}
		if got, want := EntrySize(s), len(want); got != want {
			t.Errorf("EntrySize(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestAppendNonIntegers(t *testing.T) {
	for _, tc := range []struct {
		member string
		want   []byte
	}{
		{"+1", hx("82 2B 31 03")},
		{"01", hx("82 30 31 03")},
		{"-0", hx("82 2D 30 03")},
		{"-", hx("81 2D 02")},
		{" 1", hx("82 20 31 03")},
		{"1.0", hx("83 31 2E 30 04")},
		{"000000123456", cat(hx("8C"), []byte("000000123456"), hx("0D"))},
		{"18446744073709551616", cat(hx("94"), []byte("18446744073709551616"), hx("15"))},
		{"9223372036854775808", cat(hx("93"), []byte("9223372036854775808"), hx("14"))},
		{"-9223372036854775809", cat(hx("94"), []byte("-9223372036854775809"), hx("15"))},
	} {
		b := Append(New(), []byte(tc.member))
		if got := b[HeaderSize : len(b)-1]; !bytes.Equal(got, tc.want) {
			t.Errorf("Append(%q) entry = % X, want % X", tc.member, got, tc.want)
		}
		if s, _, isInt := Get(b, HeaderSize); isInt || string(s) != tc.member {
			t.Errorf("Get(Append(%q)) = %q, isInt %v, want %q, false", tc.member, s, isInt, tc.member)
		}
	}
}

func TestWholeListpackA1(t *testing.T) {
	want := hx("1E 00 00 00 06 00  81 61 02  01 01  DF FF 02  C1 2C 02" +
		"85 68 65 6C 6C 6F 06  83 30 30 37 04  FF")
	ms := bs("a", "1", "-1", "300", "hello", "007")
	if got := build(ms...); !bytes.Equal(got, want) {
		t.Errorf("Append a,1,-1,300,hello,007 = % X, want % X", got, want)
	}
	if got := FromMembers(ms); !bytes.Equal(got, want) {
		t.Errorf("FromMembers(a,1,-1,300,hello,007) = % X, want % X", got, want)
	}
	if err := ValidateSet(want); err != nil {
		t.Errorf("ValidateSet(A.1) = %v, want nil", err)
	}
	if got := members(t, want); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", ms) {
		t.Errorf("members(A.1) = %q, want %q", got, ms)
	}
}

// TestBacklen checks every backlen size threshold of lpEncodeBacklen,
// including the ones no set member can reach.
func TestBacklen(t *testing.T) {
	for _, tc := range []struct {
		l    uint64
		want string
	}{
		{1, "01"}, {127, "7F"}, {128, "01 80"}, {202, "01 CA"},
		{16382, "7F FE"}, {16383, "00 FF FF"}, {16384, "01 80 80"},
		{2097150, "7F FF FE"}, {2097151, "00 FF FF FF"},
		{268435454, "7F FF FF FE"}, {268435455, "00 FF FF FF FF"},
		{1<<32 + 4, "10 80 80 80 84"},
	} {
		want := hx(tc.want)
		got := appendBacklen(nil, tc.l)
		if !bytes.Equal(got, want) {
			t.Errorf("appendBacklen(%d) = % X, want % X", tc.l, got, want)
		}
		if got, want := backlenSize(tc.l), len(want); got != want {
			t.Errorf("backlenSize(%d) = %d, want %d", tc.l, got, want)
		}
		if l, n := decodeBacklen(want, len(want)-1); l != tc.l || n != len(want) {
			t.Errorf("decodeBacklen(% X) = %d, %d, want %d, %d", want, l, n, tc.l, len(want))
		}
	}
	if l, n := decodeBacklen(hx("80 80 80 80 80 80"), 5); n != 0 {
		t.Errorf("decodeBacklen(6 continuation bytes) = %d, %d, want n = 0", l, n)
	}
}

func TestEntrySizeAndFromMembers(t *testing.T) {
	ms := bs("a", "", "1", "-1", "300", "100000", "9223372036854775807", "01", string(rep("x", 64)), string(rep("y", 5000)))
	total := HeaderSize + 1
	for _, m := range ms {
		total += EntrySize(m)
	}
	b := build(ms...)
	if got, want := len(b), total; got != want {
		t.Errorf("len(Append all) = %d, want %d (sum of EntrySize + 7)", got, want)
	}
	f := FromMembers(ms)
	if !bytes.Equal(f, b) {
		t.Errorf("FromMembers = % X, want % X", trunc(f), trunc(b))
	}
	if got, want := cap(f), alloc.RoundUp(total); got != want {
		t.Errorf("cap(FromMembers) = %d, want %d", got, want)
	}
	if got := FromMembers(nil); !bytes.Equal(got, New()) {
		t.Errorf("FromMembers(nil) = % X, want % X", got, New())
	}
	if !SafeToAdd(b, MaxSafeBytes-len(b)) || SafeToAdd(b, MaxSafeBytes-len(b)+1) {
		t.Errorf("SafeToAdd is not exact at the 1 GiB limit")
	}
}

// TestMemoryFiftyTwelveByteMembers pins the headline memory number: 50
// twelve-byte members are a 707-byte listpack held in a 768-byte size class.
func TestMemoryFiftyTwelveByteMembers(t *testing.T) {
	var ms [][]byte
	b := New()
	for i := range 50 {
		m := fmt.Appendf(nil, "%012d", 123456+i*7919)
		ms = append(ms, m)
		b = Append(b, m)
	}
	if got, want := len(b), 707; got != want {
		t.Errorf("len(50 x 12-byte members) = %d, want %d", got, want)
	}
	if got, want := cap(b), 768; got != want {
		t.Errorf("cap(Append-built) = %d, want %d", got, want)
	}
	if got, want := cap(FromMembers(ms)), 768; got != want {
		t.Errorf("cap(FromMembers) = %d, want %d", got, want)
	}
	if !bytes.Equal(FromMembers(ms), b) {
		t.Errorf("FromMembers differs from Append-built")
	}
}

func TestIterateAndSeek(t *testing.T) {
	ms := bs("a", "1", "-1", "300", "hello", "007", string(rep("L", 300)), "100000", "-5000000000", "")
	b := build(ms...)
	offs := offsets(t, b)
	if got, want := len(offs), len(ms); got != want {
		t.Fatalf("entries walked = %d, want %d", got, want)
	}
	for i, p := range offs {
		if got := AppendMember(nil, b, p); !bytes.Equal(got, ms[i]) {
			t.Errorf("AppendMember(entry %d) = %q, want %q", i, trunc(got), trunc(ms[i]))
		}
	}
	if got, want := First(b), offs[0]; got != want {
		t.Errorf("First = %d, want %d", got, want)
	}
	if got, want := Last(b), offs[len(offs)-1]; got != want {
		t.Errorf("Last = %d, want %d", got, want)
	}
	if got, want := Prev(b, len(b)-1), offs[len(offs)-1]; got != want {
		t.Errorf("Prev(terminator) = %d, want %d", got, want)
	}
	n := len(ms)
	for _, tc := range []struct{ index, want int }{
		{0, offs[0]}, {1, offs[1]}, {4, offs[4]}, {5, offs[5]}, {6, offs[6]}, {n - 1, offs[n-1]},
		{-1, offs[n-1]}, {-2, offs[n-2]}, {-6, offs[n-6]}, {-n, offs[0]},
		{n, -1}, {n + 1, -1}, {-n - 1, -1}, {math.MinInt, -1}, {math.MaxInt, -1},
	} {
		if got := Seek(b, tc.index); got != tc.want {
			t.Errorf("Seek(%d) = %d, want %d", tc.index, got, tc.want)
		}
	}
	// Get: string entries alias b with clipped capacity.
	s, _, isInt := Get(b, offs[4])
	if isInt || string(s) != "hello" || cap(s) != len(s) {
		t.Errorf("Get(hello) = %q, isInt %v, cap %d, want \"hello\", false, cap 5", s, isInt, cap(s))
	}
	if &s[0] != &b[offs[4]+1] {
		t.Errorf("Get(hello) does not alias the blob")
	}
	if s, v, isInt := Get(b, offs[8]); s != nil || v != -5000000000 || !isInt {
		t.Errorf("Get(-5000000000) = %q, %d, %v, want nil, -5000000000, true", s, v, isInt)
	}
	// AppendMember appends to dst.
	if got, want := AppendMember([]byte("x="), b, offs[3]), "x=300"; string(got) != want {
		t.Errorf("AppendMember(\"x=\", 300) = %q, want %q", got, want)
	}
}

func TestFind(t *testing.T) {
	ms := bs("a", "1", "-1", "300", "hello", "007", string(rep("L", 300)), "100000", "-5000000000", "", "cherry pie")
	b := build(ms...)
	offs := offsets(t, b)
	for _, tc := range []struct {
		member string
		want   int
	}{
		{"a", offs[0]},
		{"1", offs[1]}, // found as the integer entry 1
		{"-1", offs[2]},
		{"300", offs[3]},
		{"hello", offs[4]},
		{"007", offs[5]},
		{string(rep("L", 300)), offs[6]},
		{"100000", offs[7]},
		{"-5000000000", offs[8]},
		{"", offs[9]},
		{"cherry pie", offs[10]},
		{"01", -1}, // not equal to the integer 1
		{"+1", -1},
		{"1.0", -1},
		{"7", -1}, // not equal to the string "007"
		{"0300", -1},
		{"hell", -1},
		{"hellO", -1},
		{"b", -1},
		{string(rep("L", 299)), -1},
		{"2", -1},
		{"-5000000001", -1},
	} {
		if got := Find(b, []byte(tc.member)); got != tc.want {
			t.Errorf("Find(%q) = %d, want %d", trunc([]byte(tc.member)), got, tc.want)
		}
	}
	// Redis lpFind semantics on entries Redis would not write but must
	// read: an integer-looking string stored as a string entry matches by
	// bytes, an integer in a wider-than-needed encoding matches by value,
	// and short strings in 12- and 32-bit string encodings match by bytes.
	odd := hx("00 00 00 00 05 00  81 35 02  F1 07 00 03  F4 2A 00 00 00 00 00 00 00 09" +
		"E0 03 61 62 63 05  F0 02 00 00 00 78 79 07  FF")
	binary.LittleEndian.PutUint32(odd, uint32(len(odd)))
	if err := ValidateSet(odd); err != nil {
		t.Fatalf("ValidateSet(odd encodings) = %v, want nil", err)
	}
	for _, tc := range []struct {
		member string
		want   int
	}{
		{"5", 6}, {"7", 9}, {"42", 13}, {"07", -1}, {"042", -1},
		{"abc", 23}, {"xy", 29}, {"ab", -1}, {"abd", -1}, {"x", -1},
	} {
		if got := Find(odd, []byte(tc.member)); got != tc.want {
			t.Errorf("Find(%q) = %d, want %d", tc.member, got, tc.want)
		}
	}
}

func TestDelete(t *testing.T) {
	ms := bs("a", "1", "-1", "300", "hello", "007", string(rep("L", 300)), "100000")
	for _, tc := range []struct {
		name  string
		index int
	}{
		{"head", 0}, {"second", 1}, {"middle", 4}, {"long string", 6}, {"tail", len(ms) - 1},
	} {
		b := build(ms...)
		c := cap(b)
		b = Delete(b, Seek(b, tc.index))
		rest := append(append([][]byte{}, ms[:tc.index]...), ms[tc.index+1:]...)
		if err := ValidateSet(b); err != nil {
			t.Errorf("ValidateSet after Delete(%s) = %v, want nil", tc.name, err)
		}
		if want := FromMembers(rest); !bytes.Equal(b, want) {
			t.Errorf("Delete(%s) = % X, want % X", tc.name, trunc(b), trunc(want))
		}
		if got := cap(b); got != c {
			t.Errorf("cap after Delete(%s) = %d, want %d", tc.name, got, c)
		}
		if got, want := Len(b), len(rest); got != want {
			t.Errorf("Len after Delete(%s) = %d, want %d", tc.name, got, want)
		}
	}
	// Delete down to empty.
	b := build(ms...)
	for Len(b) > 0 {
		b = Delete(b, Last(b))
		if err := Validate(b, true); err != nil {
			t.Fatalf("Validate while deleting from the tail = %v", err)
		}
	}
	if !bytes.Equal(b, New()) {
		t.Errorf("after deleting everything = % X, want % X", b, New())
	}
}

// TestUnknownCount covers the 65535 header count ("walk to count").
func TestUnknownCount(t *testing.T) {
	b := build(bs("a", "b", "c")...)
	binary.LittleEndian.PutUint16(b[4:], unknownCount)
	if err := Validate(b, true); err != nil {
		t.Fatalf("Validate(count 65535) = %v, want nil", err)
	}
	if got, want := Len(b), 3; got != want {
		t.Errorf("Len(count 65535) = %d, want %d", got, want)
	}
	if got, want := Seek(b, -1), Last(b); got != want {
		t.Errorf("Seek(-1) = %d, want %d", got, want)
	}
	b = Append(b, []byte("d"))
	b = Delete(b, First(b))
	if got := binary.LittleEndian.Uint16(b[4:]); got != unknownCount {
		t.Errorf("header count after Append+Delete = %d, want %d (stays unknown, as in Redis)", got, unknownCount)
	}
	if got, want := Len(b), 3; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	// The count saturates at 65535 when it reaches it.
	c := build(bs("x")...)
	binary.LittleEndian.PutUint16(c[4:], unknownCount-1)
	c = Append(c, []byte("y"))
	if got := binary.LittleEndian.Uint16(c[4:]); got != unknownCount {
		t.Errorf("header count after 65534+1 = %d, want %d", got, unknownCount)
	}
	c = Append(c, []byte("z"))
	if got := binary.LittleEndian.Uint16(c[4:]); got != unknownCount {
		t.Errorf("header count after 65535+1 = %d, want %d", got, unknownCount)
	}
}

// TestFromMembersSaturates builds a real listpack of more than 65535 entries.
func TestFromMembersSaturates(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	ms := make([][]byte, 70000)
	for i := range ms {
		ms[i] = strconv.AppendInt(nil, int64(i), 10)
	}
	b := FromMembers(ms)
	if got := binary.LittleEndian.Uint16(b[4:]); got != unknownCount {
		t.Errorf("header count of 70000 entries = %d, want %d", got, unknownCount)
	}
	if got, want := Len(b), 70000; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	if err := ValidateSet(b); err != nil {
		t.Errorf("ValidateSet = %v, want nil", err)
	}
	if got, want := Seek(b, 69999), Last(b); got != want {
		t.Errorf("Seek(69999) = %d, want %d", got, want)
	}
}
