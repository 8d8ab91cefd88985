package fsm

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/command"
)

// SORT and SORT_RO on sets (redis/redis src/sort.c sortCommandGeneric).
// raftset holds no lists or sorted sets, so the key to sort is a set (or
// missing), and BY/GET patterns can only name strings (a "->field" hash
// dereference always finds nothing).

// errSortStoreList answers SORT ... STORE with a non-empty result: Redis
// stores the result as a list, a type raftset does not hold.
const errSortStoreList = "ERR SORT ... STORE would create a list, and raftset holds strings and sets only"

type sortItem struct {
	m     []byte
	score float64
	cmp   []byte // ALPHA BY: the value found by the pattern; nil if none
}

// cmdSort serves SORT and SORT_RO (which has no STORE).
func cmdSort(c *execCtx, args [][]byte) {
	readonly := eqFold(args[0], "sort_ro")
	var desc, alpha, dontSort bool
	var limitStart, limitCount int64 = 0, -1
	var sortBy, storeKey []byte
	var gets [][]byte
	for j := 2; j < len(args); j++ {
		left := len(args) - j - 1
		a := args[j]
		switch {
		case eqFold(a, "asc"):
			desc = false
		case eqFold(a, "desc"):
			desc = true
		case eqFold(a, "alpha"):
			alpha = true
		case eqFold(a, "limit") && left >= 2:
			s, ok1 := parseInt(args[j+1])
			n, ok2 := parseInt(args[j+2])
			if !ok1 || !ok2 {
				c.err(command.ErrNotInteger)
				return
			}
			limitStart, limitCount = s, n
			j += 2
		case !readonly && eqFold(a, "store") && left >= 1:
			storeKey = args[j+1]
			j++
		case eqFold(a, "by") && left >= 1:
			sortBy = args[j+1]
			if bytes.IndexByte(sortBy, '*') < 0 {
				dontSort = true
			}
			j++
		case eqFold(a, "get") && left >= 1:
			gets = append(gets, args[j+1])
			j++
		default:
			c.err(command.ErrSyntax)
			return
		}
	}
	var items []sortItem
	if pos := c.lookup(args[1]); pos >= 0 {
		if !c.isSet(pos) {
			c.wrongType()
			return
		}
		c.ks.set(pos).Iterate(func(m []byte) bool {
			items = append(items, sortItem{m: bytes.Clone(m)})
			return true
		})
	}
	// Unsorted output of a set would follow its storage order: Redis
	// sorts it for STORE (and scripts) so that replicas agree.
	if dontSort && storeKey != nil {
		dontSort, alpha, sortBy = false, true, nil
	}
	n := int64(len(items))
	start := max(limitStart, 0)
	end := n - 1
	if limitCount >= 0 {
		end = start + limitCount - 1
		if limitCount > math.MaxInt64-start {
			end = math.MaxInt64
		}
	}
	if start >= n {
		start, end = n-1, n-2
	}
	if end >= n {
		end = n - 1
	}

	convErr := false
	if !dontSort {
		for i := range items {
			it := &items[i]
			by := it.m
			if sortBy != nil {
				v, ok := c.sortLookup(sortBy, it.m)
				if !ok {
					continue
				}
				by = v
			}
			if alpha {
				if sortBy != nil {
					it.cmp = by
				}
				continue
			}
			f, ok := parseStrtod(by)
			if !ok {
				convErr = true
			}
			it.score = f
		}
		cmp := func(a, b sortItem) int {
			var r int
			switch {
			case !alpha:
				switch {
				case a.score > b.score:
					r = 1
				case a.score < b.score:
					r = -1
				default:
					r = bytes.Compare(a.m, b.m)
				}
			case sortBy != nil:
				switch {
				case a.cmp == nil || b.cmp == nil:
					r = boolCmp(a.cmp != nil, b.cmp != nil)
				default:
					r = bytes.Compare(a.cmp, b.cmp)
				}
			default:
				r = bytes.Compare(a.m, b.m)
			}
			if desc {
				return -r
			}
			return r
		}
		// Stable: ties (ALPHA BY equal values) keep the set's order, the
		// same on every replica.
		slices.SortStableFunc(items, cmp)
	}

	count := end - start + 1
	outLen := count
	if len(gets) > 0 {
		outLen = int64(len(gets)) * count
	}
	switch {
	case convErr:
		c.err("ERR One or more scores can't be converted into double")
	case storeKey == nil:
		c.array(int(outLen))
		for j := start; j <= end; j++ {
			if len(gets) == 0 {
				c.bulk(items[j].m)
			}
			for _, g := range gets {
				if v, ok := c.sortLookup(g, items[j].m); ok {
					c.bulk(v)
				} else {
					c.nullBulk()
				}
			}
		}
	case outLen > 0:
		c.err(errSortStoreList)
	default:
		if pos := c.lookup(storeKey); pos >= 0 {
			c.deleteAt(pos)
		}
		c.int(0)
	}
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// sortLookup is lookupKeyByPattern: "#" is the member itself; otherwise the
// first '*' of the pattern is replaced by the member and the string at that
// key is the value. A pattern without '*', a "->field" (hashes) or a key
// that is missing or not a string finds nothing.
func (c *execCtx) sortLookup(pattern, member []byte) ([]byte, bool) {
	if len(pattern) == 1 && pattern[0] == '#' {
		return member, true
	}
	star := bytes.IndexByte(pattern, '*')
	if star < 0 {
		return nil, false
	}
	post := pattern[star+1:]
	if f := bytes.Index(post, []byte("->")); f >= 0 && f+2 < len(post) {
		return nil, false
	}
	key := make([]byte, 0, len(pattern)+len(member))
	key = append(append(append(key, pattern[:star]...), member...), post...)
	pos := c.lookup(key)
	if pos < 0 || c.isSet(pos) {
		return nil, false
	}
	return c.ks.str(pos), true
}

// parseStrtod is SORT's strtod check: leading white space is skipped, the
// rest must be a number (the empty rest is 0), and NaN, overflow and
// underflow are refused.
func parseStrtod(b []byte) (float64, bool) {
	s := strings.TrimLeft(string(b), " \t\n\v\f\r")
	if s == "" {
		return 0, true
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" {
		return 0, false
	}
	switch lb := strings.ToLower(body); {
	case lb == "inf" || lb == "infinity":
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	case strings.HasPrefix(lb, "0x"):
		if !strings.Contains(lb, "p") {
			v, err := strconv.ParseUint(body[2:], 16, 64)
			if err != nil {
				return 0, false
			}
			f := float64(v)
			if s[0] == '-' {
				f = -f
			}
			return f, true
		}
	default:
		for _, ch := range lb {
			if !(ch >= '0' && ch <= '9' || ch == '.' || ch == 'e' || ch == '+' || ch == '-') {
				return 0, false
			}
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	if f == 0 || math.Abs(f) < 0x1p-1022 {
		// strtod reports ERANGE for a result below the normal range.
		mant := strings.SplitN(strings.ToLower(body), "e", 2)[0]
		if strings.ContainsAny(mant, "123456789") && !strings.HasPrefix(mant, "0x") {
			return 0, false
		}
	}
	return f, true
}
