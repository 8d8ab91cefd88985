// Package strictint decides whether a byte string is an integer the way Redis
// does (src/util.c string2ll): "0", or an optional '-', a digit 1-9 and more
// digits, at most 20 bytes, within int64. "+1", "01", "-0", " 1" and
// "000000123456" are strings. Because the rule admits exactly the canonical
// decimal form, formatting the parsed value reproduces the input bytes, which
// is what lets intsets and listpacks store such members as integers losslessly.
package strictint

import "strconv"

// MaxLen is the longest text an int64 can have ("-9223372036854775808").
const MaxLen = 20

// Parse returns the value of s and true when s is a strict Redis integer.
func Parse(s []byte) (int64, bool) {
	n := len(s)
	if n == 0 || n > MaxLen {
		return 0, false
	}
	if n == 1 && s[0] == '0' {
		return 0, true
	}
	i := 0
	neg := false
	if s[0] == '-' {
		neg = true
		i = 1
		if n == 1 {
			return 0, false
		}
	}
	if s[i] < '1' || s[i] > '9' {
		return 0, false
	}
	var v uint64
	for ; i < n; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// Len is the length of v's text: what formatting the value Parse returned
// gives back.
func Len(v int64) int {
	n := 1
	if v < 0 {
		if v == -1<<63 {
			return MaxLen
		}
		n++
		v = -v
	}
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// ParseString is Parse for a string argument.
func ParseString(s string) (int64, bool) {
	// The conversion does not allocate: the compiler sees it does not escape.
	return Parse([]byte(s))
}

// Append appends the decimal text of v, the inverse of Parse.
func Append(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }
