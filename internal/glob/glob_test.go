package glob

import (
	"bytes"
	"path"
	"strings"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		pat, s string
		want   bool
	}{
		{"", "", true},
		{"a", "a", true},
		{"a", "b", false},
		{"*", "", false}, // the matcher itself; KEYS and SCAN special-case "*"
		{"*", "abc", true},
		{"a*", "a", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbb", false},
		{"a*c", "abcd", false},
		{"a**c", "ac", true},
		{"**a", "ba", true},
		{"*a*b*c*", "xxaxxbxxcxx", true},
		{"?", "", false},
		{"?", "x", true},
		{"??", "x", false},
		{"h?llo", "hello", true},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hallo", true}, // reversed ranges swap
		{"h[a-b]llo", "hcllo", false},
		{`h\*llo`, "h*llo", true},
		{`h\*llo`, "hallo", false},
		{`[\]]`, "]", true},
		{`[\-]`, "-", true},
		{"[a-]", "-", false}, // a range from 'a' to ']', then nothing closes the class
		{"[a-]", "^", true},
		{"[abc", "a", true}, // an unclosed class is tolerated
		{"[abc", "ab", false},
		{"[", "x", false},
		{`\`, `\`, true},
		{"a[", "a", false},
		{"*[", "x", false},
		{"\xff", "\xff", true},
		{"[\x01-\xff]", "a", false}, // C's signed char: 0xff is -1, so the range is -1..1
		{"[\x01-\xff]", "\x00", true},
		{"foo*bar", "foobar", true},
		{"*.txt", "a.b.txt", true},
	} {
		if got := Match([]byte(tt.pat), []byte(tt.s), false); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pat, tt.s, got, tt.want)
		}
	}
}

func TestMatchNocase(t *testing.T) {
	for _, tt := range []struct {
		pat, s string
		want   bool
	}{
		{"set-max-*", "set-max-intset-entries", true},
		{"*MAX*", "maxclients", true},
		{"MaxClients", "maxclients", true},
		{"[A-C]x", "bx", true},
		{"[a-c]X", "Bx", true},
		{"[c-a]x", "bx", true},
		{"[^ABC]", "b", false},
		{"[B]", "b", true},
		{`[\B]`, "b", false}, // an escaped byte in a class compares exactly, even with nocase
		{`\B`, "b", true},
		// Redis swaps a reversed range before folding: "Z-a" is 'Z'..'a' as
		// bytes, which folds to 'z'..'a', an empty range.
		{"[Z-a]", "m", false},
		{"[Z-a]", "_", false},
		{"[a-Z]", "m", false},
		{"[\xc0-\xc1]", "\xe0", false}, // no folding past ASCII
		{"[abc", "A", true},
		{"a[", "a", false},
		{strings.Repeat("*a", 30) + "b", strings.Repeat("a", 60), false},
	} {
		if got := Match([]byte(tt.pat), []byte(tt.s), true); got != tt.want {
			t.Errorf("Match(%q, %q, nocase) = %v, want %v", tt.pat, tt.s, got, tt.want)
		}
	}
}

// TestMatchIsNotPathMatch pins where Redis's rules differ from path.Match,
// which CONFIG GET once used: every case here is Redis's answer.
func TestMatchIsNotPathMatch(t *testing.T) {
	for _, tt := range []struct {
		pat, s string
		want   bool
	}{
		{"*", "a/b", true},   // path.Match: '*' stops at '/'
		{"?", "/", true},     // path.Match: '?' does not match '/'
		{"[a", "a", true},    // path.Match: ErrBadPattern
		{"[]a]", "a", false}, // Redis: "[]" is an empty class, then "a]"
		{"[]a]", "]", false},
	} {
		if got := Match([]byte(tt.pat), []byte(tt.s), true); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pat, tt.s, got, tt.want)
		}
	}
	// The first difference, shown: path.Match says no.
	if ok, _ := path.Match("*", "a/b"); ok {
		t.Error("path.Match(*, a/b) matched; the case above no longer shows a difference")
	}
}

// TestMatchBounded checks that abusive patterns end quickly: the
// skip-longer-matches cut keeps '*' polynomial, and the nesting bound stops
// a long run of '*'s followed by a failing byte.
func TestMatchBounded(t *testing.T) {
	start := time.Now()
	if Match([]byte(strings.Repeat("a*", 30)+"b"), bytes.Repeat([]byte("a"), 60), false) {
		t.Error("pathological pattern matched")
	}
	deep := []byte(strings.Repeat("*x", maxNesting+10))
	if Match(deep, bytes.Repeat([]byte("x"), maxNesting+10), false) {
		t.Error("a pattern nested past the bound matched")
	}
	if Match(deep[:2*(maxNesting-10)], bytes.Repeat([]byte("x"), maxNesting-10), false) != true {
		t.Error("a pattern nested within the bound did not match")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// escape makes a pattern that matches exactly b.
func escape(b []byte) []byte {
	var out []byte
	for _, c := range b {
		out = append(out, '\\', c)
	}
	return out
}

func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"*", "abc"}, {"h[^e]llo", "hallo"}, {"[a-", "b"}, {`\`, `\`}, {"*a*b", "aab"}, {"[Z-a]", "_"}} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, pat, s []byte) {
		if len(pat) > 200 || len(s) > 200 {
			return
		}
		exact := Match(pat, s, false)
		// Folding only widens a match when no class is involved: a range
		// folds after its ends are swapped, which can empty it ("[Z-a]").
		if exact && !bytes.ContainsRune(pat, '[') && !Match(pat, s, true) {
			t.Fatalf("Match(%q, %q) but not with nocase", pat, s)
		}
		if len(s) > 0 && !Match(escape(s), s, false) {
			t.Fatalf("%q does not match its escaped self", s)
		}
		if len(s) > 0 && !Match(append(escape(s), '*'), s, false) {
			t.Fatalf("%q does not match its escaped self followed by '*'", s)
		}
		if !bytes.Equal(pat, s) && !bytes.ContainsAny(pat, `*?[\`) && exact {
			t.Fatalf("literal %q matched a different %q", pat, s)
		}
	})
}
