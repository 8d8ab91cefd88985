package fsm

import (
	"math"
	"math/big"
	"strings"

	"raftset/internal/command"
)

// String commands that read or rewrite parts of a value (redis/redis
// src/t_string.c): STRLEN, APPEND, GETRANGE/SUBSTR, SETRANGE, INCRBYFLOAT,
// GETSET, MSETNX, LCS.

// maxBulkLen is the size APPEND and SETRANGE may grow a string to: Redis's
// default proto-max-bulk-len. The front end's proto-max-bulk-len is a node's
// own setting; a write must be judged the same on every replica, so the
// state machine keeps the default fixed.
const maxBulkLen = 512 << 20

// checkStringLength is Redis's checkStringLength: size+add must stay within
// the limit (and not overflow).
func checkStringLength(size, add int64) bool {
	total := size + add
	return total <= maxBulkLen && total >= size && total >= add
}

func cmdStrlen(c *execCtx, args [][]byte) {
	pos := c.lookup(args[1])
	switch {
	case pos < 0:
		c.int(0)
	case c.isSet(pos):
		c.wrongType()
	default:
		c.int(int64(c.ks.strLen(pos)))
	}
}

// cmdAppend keeps the key's deadline, as Redis does.
func cmdAppend(c *execCtx, args [][]byte) {
	key, add := args[1], args[2]
	pos := c.lookup(key)
	if pos < 0 {
		c.setString(key, add, false, noExpiry)
		c.int(int64(len(add)))
		return
	}
	if c.isSet(pos) {
		c.wrongType()
		return
	}
	old := c.ks.str(pos)
	if !checkStringLength(int64(len(old)), int64(len(add))) {
		c.err(errTooBig)
		return
	}
	// Strings are never changed in place (a snapshot may share them).
	// APPEND leaves a raw string, as Redis's does.
	b := make([]byte, 0, len(old)+len(add))
	b = append(append(b, old...), add...)
	c.ks.putStringEnc(pos, b, encRaw)
	c.touch(pos)
	c.int(int64(len(b)))
}

// cmdGetRange serves GETRANGE and SUBSTR (getrangeCommand).
func cmdGetRange(c *execCtx, args [][]byte) {
	start, ok1 := parseInt(args[2])
	if !ok1 {
		c.err(command.ErrNotInteger)
		return
	}
	end, ok2 := parseInt(args[3])
	if !ok2 {
		c.err(command.ErrNotInteger)
		return
	}
	pos := c.lookup(args[1])
	if pos < 0 {
		c.bulk(nil)
		return
	}
	if c.isSet(pos) {
		c.wrongType()
		return
	}
	s := c.ks.str(pos)
	n := int64(len(s))
	if start < 0 && end < 0 && start > end {
		c.bulk(nil)
		return
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		c.bulk(nil)
		return
	}
	c.bulk(s[start : end+1])
}

// parseSetRange reads SETRANGE's offset: an integer (Redis's long), not
// negative.
func parseSetRange(args [][]byte) (int64, string) {
	off, ok := parseInt(args[2])
	if !ok {
		return 0, command.ErrNotInteger
	}
	if off < 0 {
		return 0, "ERR offset is out of range"
	}
	return off, ""
}

func cmdSetRange(c *execCtx, args [][]byte) {
	off, msg := parseSetRange(args)
	if msg != "" {
		c.err(msg)
		return
	}
	key, val := args[1], args[3]
	pos := c.lookup(key)
	var old []byte
	if pos < 0 {
		if len(val) == 0 {
			c.int(0)
			return
		}
	} else {
		if c.isSet(pos) {
			c.wrongType()
			return
		}
		old = c.ks.str(pos)
		if len(val) == 0 {
			c.int(int64(len(old)))
			return
		}
	}
	if !checkStringLength(off, int64(len(val))) {
		c.err(errTooBig)
		return
	}
	n := max(int64(len(old)), off+int64(len(val)))
	b := make([]byte, n)
	copy(b, old)
	copy(b[off:], val)
	// SETRANGE leaves a raw string, as Redis's does.
	if pos < 0 {
		pos = c.ks.addStringEnc(key, b, encRaw, noExpiry)
	} else {
		c.ks.putStringEnc(pos, b, encRaw)
	}
	c.touch(pos)
	c.int(n)
}

// Long doubles. Redis keeps INCRBYFLOAT's arithmetic in C's long double,
// the x87 80-bit format on the platforms it ships for: a 64-bit mantissa and
// a 15-bit exponent. big.Float with 64 bits of precision and round-to-even
// gives the same sums, in pure Go and so identically on every replica.
const (
	ldPrec   = 64
	ldMaxExp = 16384 // big.Float exponent (mantissa in [0.5, 1)) above which the value is infinite
	// maxLongDoubleChars is MAX_LONG_DOUBLE_CHARS: longer input is not a
	// number to Redis.
	maxLongDoubleChars = 5 * 1024
)

// parseLongDouble is Redis's string2ld (strtold of the whole string): no
// leading space, nothing after the number, no NaN, and a value that
// overflows or underflows to zero is refused.
func parseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= maxLongDoubleChars {
		return nil, false
	}
	s := string(b)
	neg := false
	body := s
	if body[0] == '+' || body[0] == '-' {
		neg = body[0] == '-'
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		return new(big.Float).SetInf(neg), true
	}
	if body == "" || !(body[0] >= '0' && body[0] <= '9' || body[0] == '.') {
		return nil, false
	}
	base := 10
	digits := body
	if len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		// strtold's hexadecimal form: 0x, hex digits, an optional point
		// and an optional binary exponent (p).
		base, digits = 0, body[2:]
	}
	for i := 0; i < len(digits); i++ {
		ch := digits[i] | 0x20
		// big.Float also reads underscores and other base prefixes;
		// strtold has none of them.
		ok := ch >= '0' && ch <= '9' || ch == '.' || ch == '+' || ch == '-'
		if base == 10 {
			ok = ok || ch == 'e'
		} else {
			ok = ok || ch >= 'a' && ch <= 'f' || ch == 'p'
		}
		if !ok {
			return nil, false
		}
	}
	f, _, err := new(big.Float).SetPrec(ldPrec).SetMode(big.ToNearestEven).Parse(s, base)
	if err != nil {
		return nil, false
	}
	if f.IsInf() || f.MantExp(nil) > ldMaxExp {
		return nil, false
	}
	if f.Sign() == 0 && strings.ContainsAny(strings.SplitN(strings.ToLower(body), "e", 2)[0], "123456789") {
		return nil, false // underflow to zero: ERANGE
	}
	return f, true
}

// formatLongDouble is ld2string in LD_STR_HUMAN mode: "%.17Lf", then the
// trailing zeros (and a bare point) removed, and "-0" written as "0".
func formatLongDouble(f *big.Float) []byte {
	s := f.Text('f', 17)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return []byte(s)
}

const errNotFloat = "ERR value is not a valid float"

// cmdIncrByFloat keeps the key's deadline, as Redis does (it propagates a
// SET ... KEEPTTL; here the command itself is the log entry).
func cmdIncrByFloat(c *execCtx, args [][]byte) {
	key := args[1]
	pos := c.lookup(key)
	value := new(big.Float).SetPrec(ldPrec)
	if pos >= 0 {
		if c.isSet(pos) {
			c.wrongType()
			return
		}
		v, ok := parseLongDouble(c.ks.str(pos))
		if !ok {
			c.err(errNotFloat)
			return
		}
		value = v
	}
	incr, ok := parseLongDouble(args[2])
	if !ok {
		c.err(errNotFloat)
		return
	}
	if value.IsInf() || incr.IsInf() {
		c.err("ERR increment would produce NaN or Infinity")
		return
	}
	sum := new(big.Float).SetPrec(ldPrec).SetMode(big.ToNearestEven).Add(value, incr)
	if sum.MantExp(nil) > ldMaxExp {
		c.err("ERR increment would produce NaN or Infinity")
		return
	}
	b := formatLongDouble(sum)
	// createStringObject's encoding: by length, even for "3".
	if pos < 0 {
		pos = c.ks.addStringEnc(key, b, encBytes, noExpiry)
	} else {
		c.ks.putStringEnc(pos, b, encBytes)
	}
	c.touch(pos)
	c.bulk(b)
}

// cmdGetSet replies as GET, then sets the value and drops the deadline.
func cmdGetSet(c *execCtx, args [][]byte) {
	pos := c.lookup(args[1])
	switch {
	case pos < 0:
		c.nullBulk()
	case c.isSet(pos):
		c.wrongType()
		return
	default:
		c.bulk(c.ks.str(pos))
	}
	c.setString(args[1], args[2], false, noExpiry)
}

func prepareMSetNX(args [][]byte, _ int64) ([][]byte, string) {
	if len(args)%2 == 0 {
		return nil, command.ErrArity("msetnx")
	}
	return args, ""
}

// cmdMSetNX sets every key only if none exists (of any type).
func cmdMSetNX(c *execCtx, args [][]byte) {
	if _, msg := prepareMSetNX(args, 0); msg != "" {
		c.err(msg)
		return
	}
	for i := 1; i < len(args); i += 2 {
		if c.lookup(args[i]) >= 0 {
			c.int(0)
			return
		}
	}
	for i := 1; i < len(args); i += 2 {
		c.setString(args[i], args[i+1], false, noExpiry)
	}
	c.int(1)
}

// maxLCSTable bounds LCS's table (4 bytes a cell): Redis refuses when it
// cannot allocate it; a replica must not run out of memory over a read, so
// the bound is proto-max-bulk-len, as Redis's error text says.
const maxLCSTable = maxBulkLen

// cmdLCS is lcsCommand, reply for reply.
func cmdLCS(c *execCtx, args [][]byte) {
	var a, b []byte
	for i, k := range args[1:3] {
		pos := c.lookup(k)
		if pos >= 0 && c.isSet(pos) {
			c.err("ERR The specified keys must contain string values")
			return
		}
		if pos >= 0 {
			if i == 0 {
				a = c.ks.str(pos)
			} else {
				b = c.ks.str(pos)
			}
		}
	}
	var getLen, getIdx, withMatchLen bool
	var minMatchLen int64
	for j := 3; j < len(args); j++ {
		more := len(args) - 1 - j
		switch o := args[j]; {
		case eqFold(o, "idx"):
			getIdx = true
		case eqFold(o, "len"):
			getLen = true
		case eqFold(o, "withmatchlen"):
			withMatchLen = true
		case eqFold(o, "minmatchlen") && more > 0:
			n, ok := parseInt(args[j+1])
			if !ok {
				c.err(command.ErrNotInteger)
				return
			}
			minMatchLen = max(n, 0)
			j++
		default:
			c.err(command.ErrSyntax)
			return
		}
	}
	if getIdx && getLen {
		c.err("ERR If you want both the length and indexes, please just use IDX.")
		return
	}
	if len(a) >= math.MaxUint32-1 || len(b) >= math.MaxUint32-1 {
		c.err("ERR String too long for LCS")
		return
	}
	alen, blen := len(a), len(b)
	if cells := uint64(alen+1) * uint64(blen+1); cells*4 > maxLCSTable {
		c.err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
		return
	}
	w := blen + 1
	lcs := make([]uint32, (alen+1)*w)
	for i := 1; i <= alen; i++ {
		for j := 1; j <= blen; j++ {
			if a[i-1] == b[j-1] {
				lcs[i*w+j] = lcs[(i-1)*w+j-1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i-1)*w+j], lcs[i*w+j-1])
			}
		}
	}
	idx := lcs[alen*w+blen]
	computeLCS := getIdx || !getLen
	var result []byte
	if computeLCS {
		result = make([]byte, idx)
	}
	var matches []byte
	nMatches := 0
	aStart, aEnd, bStart, bEnd := alen, 0, 0, 0 // aStart == alen: no range open
	i, j := alen, blen
	for computeLCS && i > 0 && j > 0 {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			if aStart == alen {
				aStart, aEnd, bStart, bEnd = i-1, i-1, j-1, j-1
			} else if aStart == i && bStart == j {
				aStart--
				bStart--
			} else {
				emit = true
			}
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if lcs[(i-1)*w+j] > lcs[i*w+j-1] {
				i--
			} else {
				j--
			}
			if aStart != alen {
				emit = true
			}
		}
		matchLen := int64(aEnd - aStart + 1)
		if emit {
			if getIdx && (minMatchLen == 0 || matchLen >= minMatchLen) {
				n := 2
				if withMatchLen {
					n = 3
				}
				matches = command.AppendArray(matches, n)
				matches = command.AppendArray(matches, 2)
				matches = command.AppendInt(matches, int64(aStart))
				matches = command.AppendInt(matches, int64(aEnd))
				matches = command.AppendArray(matches, 2)
				matches = command.AppendInt(matches, int64(bStart))
				matches = command.AppendInt(matches, int64(bEnd))
				if withMatchLen {
					matches = command.AppendInt(matches, matchLen)
				}
				nMatches++
			}
			aStart = alen
		}
	}
	switch {
	case getIdx:
		c.array(4)
		c.bulkStr("matches")
		c.array(nMatches)
		c.raw(matches)
		c.bulkStr("len")
		c.int(int64(lcs[alen*w+blen]))
	case getLen:
		c.int(int64(idx))
	default:
		c.bulk(result)
	}
}
