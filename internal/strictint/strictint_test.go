package strictint

import (
	"strconv"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"-1", -1, true}, {"127", 127, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false}, {"-9223372036854775809", 0, false},
		{"18446744073709551616", 0, false}, {"99999999999999999999", 0, false},
		{"", 0, false}, {"-", 0, false}, {"-0", 0, false}, {"+1", 0, false},
		{"01", 0, false}, {"000000123456", 0, false}, {" 1", 0, false}, {"1 ", 0, false},
		{"1.0", 0, false}, {"0x10", 0, false}, {"213244124402402314402033402", 0, false},
	} {
		got, ok := Parse([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Parse(%q) = %d, %v, want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParse checks the defining property: Parse accepts exactly the strings
// that are the canonical decimal form of an int64.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "-1", "01", "+1", "9223372036854775807", "-9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		v, ok := Parse(s)
		canon := false
		if pv, err := strconv.ParseInt(string(s), 10, 64); err == nil && strconv.FormatInt(pv, 10) == string(s) {
			canon = true
			if ok && pv != v {
				t.Fatalf("Parse(%q) = %d, want %d", s, v, pv)
			}
		}
		if ok != canon {
			t.Fatalf("Parse(%q) ok = %v, canonical = %v", s, ok, canon)
		}
		if ok && Len(v) != len(s) {
			t.Fatalf("Len(%d) = %d, want %d", v, Len(v), len(s))
		}
	})
}

func TestLen(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 9, 10, -9, -10, 99, 100, 1<<31 - 1, -1 << 31,
		999999999999999999, 1000000000000000000, 1<<63 - 1, -1<<63 + 1, -1 << 63} {
		if got, want := Len(v), len(strconv.FormatInt(v, 10)); got != want {
			t.Errorf("Len(%d) = %d, want %d", v, got, want)
		}
	}
}
