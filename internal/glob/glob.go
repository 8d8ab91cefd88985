// Package glob matches the glob patterns of KEYS, SCAN MATCH, PSUBSCRIBE,
// CONFIG GET and COMMAND LIST FILTERBY PATTERN with Redis's own rules (its
// stringmatchlen), so that a pattern selects here exactly what it selects
// on a redis-server. Go's path.Match and filepath.Match differ (no escapes
// inside classes, '^' is not negation, '/' is special), which is why there
// is one matcher and everything uses it.
package glob

// maxNesting bounds the recursion of '*' as Redis does (abusive patterns
// fail to match instead of exhausting the stack).
const maxNesting = 1000

// Match reports whether s matches pattern byte-wise: '*' (runs of '*'
// collapse), '?', classes "[abc]", "[^abc]" and ranges "[a-z]" (reversed
// ranges swap; bytes compare as C's signed char), '\' escaping the next
// byte inside and outside classes, an unclosed '[' tolerated, and no match
// past a nesting depth of 1000. nocase folds ASCII letters, except for a
// byte escaped inside a class, which Redis compares exactly.
//
// As in Redis, "*" does not match the empty string: KEYS and SCAN
// special-case the pattern "*" to mean every key.
func Match(pattern, s []byte, nocase bool) bool {
	skipLonger := false
	return match(pattern, s, nocase, &skipLonger, 0)
}

// at returns p[i], or 0 past the end: Redis reads its NUL-terminated
// buffers that way, and the port keeps its exact indexing.
func at(p []byte, i int) byte {
	if i < len(p) {
		return p[i]
	}
	return 0
}

// lower is C's tolower in the C locale on a char widened to int: only
// 'A'..'Z' change.
func lower(c int) int {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// eq compares two bytes, folding case when nocase.
func eq(a, b byte, nocase bool) bool {
	if nocase {
		return lower(int(int8(a))) == lower(int(int8(b)))
	}
	return a == b
}

func match(pattern, s []byte, nocase bool, skipLonger *bool, nesting int) bool {
	if nesting > maxNesting {
		return false
	}
	p := 0 // index into pattern; len(pattern)-p is Redis's patternLen
	i := 0 // index into s
	for p < len(pattern) && i < len(s) {
		switch pattern[p] {
		case '*':
			for p < len(pattern) && at(pattern, p+1) == '*' {
				p++
			}
			if len(pattern)-p == 1 {
				return true
			}
			for i < len(s) {
				if match(pattern[p+1:], s[i:], nocase, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				i++
			}
			// No match for the rest of the pattern from anywhere in the rest
			// of s: earlier '*'s cannot help by matching longer.
			*skipLonger = true
			return false
		case '?':
			i++
		case '[':
			p++
			not := at(pattern, p) == '^'
			if not {
				p++
			}
			matched := false
			for {
				rem := len(pattern) - p
				switch {
				case at(pattern, p) == '\\' && rem >= 2:
					p++
					if pattern[p] == s[i] {
						matched = true
					}
				case at(pattern, p) == ']':
					goto closed
				case rem == 0:
					p-- // unclosed class: Redis steps back so the outer p++ ends the pattern
					goto closed
				case rem >= 3 && pattern[p+1] == '-':
					start, end := int(int8(pattern[p])), int(int8(pattern[p+2]))
					ch := int(int8(s[i]))
					if start > end {
						start, end = end, start
					}
					if nocase { // after the swap, as Redis does
						start, end, ch = lower(start), lower(end), lower(ch)
					}
					p += 2
					if ch >= start && ch <= end {
						matched = true
					}
				default:
					if eq(pattern[p], s[i], nocase) {
						matched = true
					}
				}
				p++
			}
		closed:
			if not {
				matched = !matched
			}
			if !matched {
				return false
			}
			i++
		case '\\':
			if len(pattern)-p >= 2 {
				p++
			}
			fallthrough
		default:
			if !eq(pattern[p], s[i], nocase) {
				return false
			}
			i++
		}
		p++
		if i == len(s) {
			for p < len(pattern) && pattern[p] == '*' {
				p++
			}
			break
		}
	}
	return p == len(pattern) && i == len(s)
}
