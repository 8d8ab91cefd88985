package fsm

// globMatch reports whether s matches the glob pattern as Redis's
// stringmatchlen (src/util.c) does, case-sensitively and byte-wise: '*'
// (runs of '*' collapse), '?', classes "[abc]", "[^abc]" and ranges "[a-z]"
// (reversed ranges swap; bytes compare as C's signed char), '\' escaping
// the next byte inside and outside classes, an unclosed '[' tolerated, and
// no match past a nesting depth of 1000. Callers special-case the pattern
// "*" (which, unlike here, matches everything).
func globMatch(pattern, s []byte) bool {
	skipLonger := false
	return globMatchImpl(pattern, s, &skipLonger, 0)
}

// at returns p[i], or 0 past the end: Redis reads its NUL-terminated
// buffers that way, and the port keeps its exact indexing.
func at(p []byte, i int) byte {
	if i < len(p) {
		return p[i]
	}
	return 0
}

func globMatchImpl(pattern, s []byte, skipLonger *bool, nesting int) bool {
	if nesting > 1000 {
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
				if globMatchImpl(pattern[p+1:], s[i:], skipLonger, nesting+1) {
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
			match := false
			for {
				rem := len(pattern) - p
				switch {
				case at(pattern, p) == '\\' && rem >= 2:
					p++
					if pattern[p] == s[i] {
						match = true
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
					p += 2
					if ch >= start && ch <= end {
						match = true
					}
				default:
					if pattern[p] == s[i] {
						match = true
					}
				}
				p++
			}
		closed:
			if not {
				match = !match
			}
			if !match {
				return false
			}
			i++
		case '\\':
			if len(pattern)-p >= 2 {
				p++
			}
			fallthrough
		default:
			if pattern[p] != s[i] {
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
