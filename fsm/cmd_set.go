package fsm

import (
	"bytes"
	"math"
	"slices"

	"raftset/internal/command"
	"raftset/internal/setenc"
)

// Set commands (redis/redis src/t_set.c).

const errOutOfRangeSigned = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"

func cmdSAdd(c *execCtx, args [][]byte) {
	key, members := args[1], args[2:]
	lim := c.ks.lim
	pos := c.lookup(key)
	if pos < 0 {
		s := setenc.NewForAdd(members[0], len(members), lim)
		n := s.AddMany(members, lim)
		c.insertSet(key, s)
		c.int(int64(n))
		return
	}
	if !c.isSet(pos) {
		c.wrongType()
		return
	}
	s := c.ks.setForWrite(pos)
	n := s.AddMany(members, lim)
	if n > 0 {
		c.touch(pos)
	}
	c.int(int64(n))
}

func cmdSRem(c *execCtx, args [][]byte) {
	pos := c.lookup(args[1])
	if pos < 0 {
		c.int(0)
		return
	}
	if !c.isSet(pos) {
		c.wrongType()
		return
	}
	s := c.ks.setForWrite(pos)
	n := 0
	for _, m := range args[2:] {
		if s.Remove(m) {
			n++
			if s.Len() == 0 {
				break
			}
		}
	}
	if s.Len() == 0 {
		c.deleteAt(pos)
	} else if n > 0 {
		c.touch(pos)
	}
	c.int(int64(n))
}

// readSet looks up key for a read of a set: it returns the set, or nil after
// appending missing (for a missing key) or WRONGTYPE.
func (c *execCtx) readSet(key []byte, missing []byte) *setenc.Set {
	pos := c.lookup(key)
	if pos < 0 {
		c.raw(missing)
		return nil
	}
	if !c.isSet(pos) {
		c.wrongType()
		return nil
	}
	return c.ks.set(pos)
}

func cmdSCard(c *execCtx, args [][]byte) {
	if s := c.readSet(args[1], command.Zero); s != nil {
		c.int(int64(s.Len()))
	}
}

func cmdSIsMember(c *execCtx, args [][]byte) {
	if s := c.readSet(args[1], command.Zero); s != nil {
		c.bool(s.Contains(args[2]))
	}
}

func cmdSMIsMember(c *execCtx, args [][]byte) {
	pos := c.lookup(args[1])
	if pos >= 0 && !c.isSet(pos) {
		c.wrongType()
		return
	}
	var s *setenc.Set
	if pos >= 0 {
		s = c.ks.set(pos)
	}
	c.array(len(args) - 2)
	for _, m := range args[2:] {
		c.bool(s != nil && s.Contains(m))
	}
}

func cmdSMembers(c *execCtx, args [][]byte) {
	if s := c.readSet(args[1], command.EmptyArr); s != nil {
		c.members(s)
	}
}

// members appends the whole set in storage order.
func (c *execCtx) members(s *setenc.Set) {
	c.array(s.Len())
	s.Iterate(func(m []byte) bool { c.bulk(m); return true })
}

// parseSPopCount parses SPOP's count as getPositiveLongFromObjectOrReply
// does: anything but an integer of at least 0 gets "value is out of range,
// must be positive", a non-integer too. (Not "value is not an integer or
// out of range", which one would expect and SRANDMEMBER answers; Redis
// 7.0.15 and the 7.x source answer as here.)
func parseSPopCount(b []byte) (int64, string) {
	n, ok := parseInt(b)
	if !ok || n < 0 {
		return 0, command.ErrOutOfRange
	}
	return n, ""
}

func prepareSPop(args [][]byte, _ int64) ([][]byte, string) {
	if len(args) > 3 {
		return nil, command.ErrSyntax
	}
	if len(args) == 3 {
		if _, msg := parseSPopCount(args[2]); msg != "" {
			return nil, msg
		}
	}
	return args, ""
}

func cmdSPop(c *execCtx, args [][]byte) {
	if len(args) > 3 {
		c.err(command.ErrSyntax)
		return
	}
	if len(args) == 3 {
		spopCount(c, args)
		return
	}
	pos := c.lookup(args[1])
	if pos < 0 {
		c.nullBulk()
		return
	}
	if !c.isSet(pos) {
		c.wrongType()
		return
	}
	s := c.ks.setForWrite(pos)
	// The member goes through scratch: memberAt's bytes may alias the
	// blob that removeAt rewrites, and a fresh slice per SPOP was an
	// allocation per op.
	c.scratch = s.PopAppend(c.scratch[:0], c.rng())
	if s.Len() == 0 {
		c.deleteAt(pos)
	} else {
		c.touch(pos)
	}
	c.bulk(c.scratch)
}

func spopCount(c *execCtx, args [][]byte) {
	count, msg := parseSPopCount(args[2])
	if msg != "" {
		c.err(msg)
		return
	}
	pos := c.lookup(args[1])
	if pos < 0 {
		c.emptyArray()
		return
	}
	if !c.isSet(pos) {
		c.wrongType()
		return
	}
	if count == 0 {
		c.emptyArray()
		return
	}
	lim := c.ks.lim
	if size := c.ks.set(pos).Len(); count >= int64(size) {
		// The whole set, in the order of a freshly built union (Redis runs
		// SUNION on the key), then the key goes.
		all := setenc.Union([]*setenc.Set{c.ks.set(pos)}, lim)
		c.members(all)
		c.deleteAt(pos)
		return
	}
	s := c.ks.setForWrite(pos)
	popped := s.PopN(c.rng(), int(count), lim)
	c.touch(pos)
	c.array(len(popped))
	for _, m := range popped {
		c.bulk(m)
	}
}

func cmdSRandMember(c *execCtx, args [][]byte) {
	if len(args) > 3 {
		c.err(command.ErrSyntax)
		return
	}
	if len(args) == 2 {
		if s := c.readSet(args[1], command.NullBulk); s != nil {
			c.bulk(s.RandomMember(c.rng()))
		}
		return
	}
	count, ok := parseInt(args[2])
	if !ok {
		c.err(command.ErrNotInteger)
		return
	}
	if count == math.MinInt64 {
		c.err(errOutOfRangeSigned)
		return
	}
	s := c.readSet(args[1], command.EmptyArr)
	if s == nil {
		return
	}
	switch {
	case count == 0:
		c.emptyArray()
	case count < 0 || count == 1:
		n := int(max(count, -count))
		c.array(n)
		s.RandomMembersWithRepeats(c.rng(), n, func(m []byte) { c.bulk(m) })
	default:
		picked := s.RandomMembers(c.rng(), int(min(count, math.MaxInt)))
		c.array(len(picked))
		for _, m := range picked {
			c.bulk(m)
		}
	}
}

func cmdSMove(c *execCtx, args [][]byte) {
	src, dst, m := args[1], args[2], args[3]
	sp := c.lookup(src)
	dp := c.lookup(dst)
	if sp < 0 {
		c.int(0)
		return
	}
	sp = c.ks.find(src) // dst's expiry may have moved it
	if !c.isSet(sp) || (dp >= 0 && !c.isSet(dp)) {
		c.wrongType()
		return
	}
	if bytes.Equal(src, dst) {
		c.bool(c.ks.set(sp).Contains(m))
		return
	}
	if !c.ks.set(sp).Contains(m) {
		c.int(0)
		return
	}
	s := c.ks.setForWrite(sp)
	s.Remove(m)
	if s.Len() == 0 {
		c.deleteAt(sp)
	} else {
		c.touch(sp)
	}
	lim := c.ks.lim
	if dp = c.ks.find(dst); dp < 0 {
		ns := setenc.NewForAdd(m, 1, lim)
		ns.Add(m, lim)
		c.insertSet(dst, ns)
	} else {
		ds := c.ks.setForWrite(dp)
		added := ds.Add(m, lim)
		if added {
			c.touch(dp)
		}
	}
	c.int(1)
}

// --- SINTER, SUNION, SDIFF and their STORE and CARD forms --------------------

func cmdSInter(c *execCtx, args [][]byte) { sinter(c, args[1:], nil, false, 0) }

func cmdSInterStore(c *execCtx, args [][]byte) { sinter(c, args[2:], args[1], false, 0) }

func cmdSInterCard(c *execCtx, args [][]byte) {
	numkeys, ok := parseInt(args[1])
	if !ok || numkeys <= 0 {
		c.err("ERR numkeys should be greater than 0")
		return
	}
	if numkeys > int64(len(args)-2) {
		c.err("ERR Number of keys can't be greater than number of args")
		return
	}
	var limit int64
	for j := 2 + int(numkeys); j < len(args); j++ {
		if eqFold(args[j], "limit") && j+1 < len(args) {
			j++
			l, ok := parseInt(args[j])
			if !ok || l < 0 {
				c.err("ERR LIMIT can't be negative")
				return
			}
			limit = l
		} else {
			c.err(command.ErrSyntax)
			return
		}
	}
	sinter(c, args[2:2+numkeys], nil, true, limit)
}

// sinter is sinterGenericCommand: with dst it stores the result, with
// card it counts (up to limit, 0 for no limit), otherwise it replies with
// the members in the iteration order of the smallest set.
func sinter(c *execCtx, keys [][]byte, dst []byte, card bool, limit int64) {
	sets, ok := c.setsFor(keys)
	if !ok {
		return
	}
	if slices.Contains(sets, nil) {
		switch {
		case dst != nil:
			if pos := c.lookup(dst); pos >= 0 {
				c.deleteAt(pos)
			}
			c.int(0)
		case card:
			c.int(0)
		default:
			c.emptyArray()
		}
		return
	}
	if dst != nil {
		res := setenc.Inter(sets, c.ks.lim)
		c.storeOrDelete(dst, res)
		return
	}
	sorted := slices.Clone(sets)
	slices.SortStableFunc(sorted, func(a, b *setenc.Set) int { return a.Len() - b.Len() })
	var l bulkList
	var n int64
	sorted[0].Iterate(func(m []byte) bool {
		for _, o := range sorted[1:] {
			if o != sorted[0] && !o.Contains(m) {
				return true
			}
		}
		n++
		if !card {
			l.add(m)
		}
		return limit == 0 || n < limit
	})
	if card {
		c.int(n)
		return
	}
	c.list(&l)
}

// storeOrDelete is the end of every *STORE command: a non-empty result
// replaces dst (value and deadline), an empty one deletes it.
func (c *execCtx) storeOrDelete(dst []byte, res *setenc.Set) {
	if n := res.Len(); n > 0 {
		c.storeSet(dst, res)
		c.int(int64(n))
		return
	}
	if pos := c.lookup(dst); pos >= 0 {
		c.deleteAt(pos)
	}
	c.int(0)
}

func cmdSUnion(c *execCtx, args [][]byte)      { sunionDiff(c, args[1:], nil, false) }
func cmdSUnionStore(c *execCtx, args [][]byte) { sunionDiff(c, args[2:], args[1], false) }
func cmdSDiff(c *execCtx, args [][]byte)       { sunionDiff(c, args[1:], nil, true) }
func cmdSDiffStore(c *execCtx, args [][]byte)  { sunionDiff(c, args[2:], args[1], true) }

func sunionDiff(c *execCtx, keys [][]byte, dst []byte, diff bool) {
	sets, ok := c.setsFor(keys)
	if !ok {
		return
	}
	var res *setenc.Set
	if diff {
		res = setenc.Diff(sets, c.ks.lim)
	} else {
		res = setenc.Union(sets, c.ks.lim)
	}
	if dst != nil {
		c.storeOrDelete(dst, res)
		return
	}
	c.members(res)
}

// --- SSCAN ---------------------------------------------------------------------

func cmdSScan(c *execCtx, args [][]byte) {
	cursor, ok := parseCursor(args[2])
	if !ok {
		c.err(command.ErrInvalidCur)
		return
	}
	s := c.readSet(args[1], emptyScan)
	if s == nil {
		return
	}
	opt, msg := parseScanOptions(args[3:], false)
	if msg != "" {
		c.err(msg)
		return
	}
	var l bulkList
	next := s.Scan(cursor, opt.count, func(m []byte) {
		if opt.match(m) {
			l.add(m)
		}
	})
	c.scanReply(next, &l)
}
