package fsm

import (
	"bytes"
	"math"
	"strconv"

	"raftset/internal/command"
	"raftset/internal/glob"
	"raftset/internal/setenc"
	"raftset/internal/strictint"
)

// Generic key commands (redis/redis src/db.c).

var emptyScan = []byte("*2\r\n$1\r\n0\r\n*0\r\n")

func cmdDel(c *execCtx, args [][]byte) {
	n := 0
	for _, k := range args[1:] {
		if pos := c.lookup(k); pos >= 0 {
			c.deleteAt(pos)
			n++
		}
	}
	c.int(int64(n))
}

// cmdExists serves EXISTS: repeated keys count each time.
func cmdExists(c *execCtx, args [][]byte) { existing(c, args, false) }

// existing answers EXISTS and TOUCH; only TOUCH records an access.
func existing(c *execCtx, args [][]byte, touch bool) {
	n := 0
	for _, k := range args[1:] {
		if c.lookupKey(k, touch) >= 0 {
			n++
		}
	}
	c.int(int64(n))
}

func cmdType(c *execCtx, args [][]byte) {
	pos := c.lookupKey(args[1], false)
	switch {
	case pos < 0:
		c.simple("none")
	case c.isSet(pos):
		c.simple("set")
	default:
		c.simple("string")
	}
}

func cmdRename(c *execCtx, args [][]byte)   { rename(c, args, false) }
func cmdRenameNX(c *execCtx, args [][]byte) { rename(c, args, true) }

// rename is renameGenericCommand: the value and the deadline move to dst
// (which loses its own), and both keys change.
func rename(c *execCtx, args [][]byte, nx bool) {
	src, dst := args[1], args[2]
	sp := c.lookup(src)
	if sp < 0 {
		c.err(command.ErrNoSuchKey)
		return
	}
	if bytes.Equal(src, dst) {
		if nx {
			c.int(0)
		} else {
			c.ok()
		}
		return
	}
	if dp := c.lookup(dst); dp >= 0 {
		if nx {
			c.int(0)
			return
		}
		c.deleteAt(dp)
	}
	sp = c.ks.find(src) // deleting dst may have moved it
	np := c.ks.add(dst, c.ks.kind(sp), c.ks.exp(sp))
	c.ks.move(sp, np) // the value moves with its shared state
	c.touch(np)
	c.deleteAt(c.ks.find(src))
	if nx {
		c.int(1)
	} else {
		c.ok()
	}
}

func cmdKeys(c *execCtx, args [][]byte) {
	pat := args[1]
	all := len(pat) == 1 && pat[0] == '*'
	var l bulkList
	ks := c.ks
	for pos := range ks.Len() {
		if ks.expiredAt(pos, c.now) {
			continue
		}
		k := ks.keys.At(pos)
		if all || glob.Match(pat, k, false) {
			l.add(k)
		}
	}
	c.list(&l)
}

func cmdDBSize(c *execCtx, _ [][]byte) { c.int(int64(c.ks.Len())) }

// scanOptions are the parsed MATCH, COUNT and TYPE options of SCAN/SSCAN.
type scanOptions struct {
	count   int
	pattern []byte // nil: everything
	typ     []byte // SCAN only; nil: every type
}

func (o *scanOptions) match(b []byte) bool {
	return o.pattern == nil || glob.Match(o.pattern, b, false)
}

// parseScanOptions is the option loop of Redis's scanGenericCommand.
func parseScanOptions(args [][]byte, withType bool) (scanOptions, string) {
	o := scanOptions{count: 10}
	for i := 0; i < len(args); {
		more := len(args) - i
		switch {
		case eqFold(args[i], "count") && more >= 2:
			n, ok := parseInt(args[i+1])
			if !ok {
				return o, command.ErrNotInteger
			}
			if n < 1 {
				return o, command.ErrSyntax
			}
			o.count = int(min(n, math.MaxInt32))
			i += 2
		case eqFold(args[i], "match") && more >= 2:
			p := args[i+1]
			if len(p) == 1 && p[0] == '*' {
				o.pattern = nil
			} else {
				o.pattern = p
			}
			i += 2
		case withType && eqFold(args[i], "type") && more >= 2:
			o.typ = args[i+1]
			i += 2
		default:
			return o, command.ErrSyntax
		}
	}
	return o, ""
}

// parseCursor parses a SCAN cursor as Redis's strtoul-based
// parseScanCursorOrReply does: an optional sign (a negative cursor wraps),
// decimal digits, nothing else; no leading space; the empty string is 0.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	switch b[0] {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return 0, false
	}
	i, neg := 0, false
	if b[0] == '+' || b[0] == '-' {
		neg = b[0] == '-'
		i++
	}
	if i == len(b) {
		return 0, false
	}
	var v uint64
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			return 0, false
		}
		if v > (math.MaxUint64-uint64(d))/10 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	if neg {
		v = -v
	}
	return v, true
}

func (c *execCtx) scanReply(cursor uint64, l *bulkList) {
	c.array(2)
	var buf [20]byte
	c.bulk(strconv.AppendUint(buf[:0], cursor, 10))
	c.list(l)
}

// cmdScan walks the dense key order from the end towards position 0, as
// hashtable.Table.Scan does: a removal only moves the last key into a hole,
// so a key present for the whole scan is returned at least once however the
// keyspace changes between calls. The cursor is the position to resume
// below; COUNT positions are visited per call, and filtered keys (expired,
// MATCH, TYPE) still count, so a page may be empty with a cursor not 0.
func cmdScan(c *execCtx, args [][]byte) {
	cursor, ok := parseCursor(args[1])
	if !ok {
		c.err(command.ErrInvalidCur)
		return
	}
	opt, msg := parseScanOptions(args[2:], true)
	if msg != "" {
		c.err(msg)
		return
	}
	ks := c.ks
	pos := uint64(ks.Len())
	if cursor != 0 && cursor < pos {
		pos = cursor
	}
	var l bulkList
	for n := 0; pos > 0 && n < opt.count; n++ {
		pos--
		p := int(pos)
		if ks.expiredAt(p, c.now) {
			continue
		}
		k := ks.keys.At(p)
		if !opt.match(k) {
			continue
		}
		if opt.typ != nil && !eqFoldBytes(opt.typ, typeName(ks, p)) {
			continue
		}
		l.add(k)
	}
	c.scanReply(pos, &l)
}

func typeName(ks *keyspace, pos int) string {
	if ks.isSet(pos) {
		return "set"
	}
	return "string"
}

// eqFoldBytes is a case-insensitive comparison of b with the ASCII word s.
func eqFoldBytes(b []byte, s string) bool {
	return len(b) == len(s) && bytes.EqualFold(b, []byte(s))
}

// cmdRandomKey picks uniformly among positions, retrying over logically
// expired keys; it never deletes them.
func cmdRandomKey(c *execCtx, _ [][]byte) {
	ks := c.ks
	n := ks.Len()
	if n == 0 {
		c.nullBulk()
		return
	}
	src := c.rng()
	for range 100 {
		if pos := setenc.Intn(src, n); !ks.expiredAt(pos, c.now) {
			c.bulk(ks.keys.At(pos))
			return
		}
	}
	start := setenc.Intn(src, n)
	for i := range n {
		if pos := (start + i) % n; !ks.expiredAt(pos, c.now) {
			c.bulk(ks.keys.At(pos))
			return
		}
	}
	c.nullBulk()
}

var objectHelp = []string{
	"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"ENCODING <key>",
	"    Return the kind of internal representation used in order to store the value",
	"    associated with a <key>.",
	"FREQ <key>",
	"    Return the access frequency index of the <key>. The returned integer is",
	"    proportional to the logarithm of the recent access frequency of the key.",
	"IDLETIME <key>",
	"    Return the idle time of the <key>, that is the approximated number of",
	"    seconds elapsed since the last access to the key.",
	"REFCOUNT <key>",
	"    Return the number of references of the value associated with the specified",
	"    <key>.",
	"HELP",
	"    Prints this help.",
}

const (
	errNotLFU = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that " +
		"when switching between policies at runtime LRU and LFU data will take some time to adjust."
	errLFU = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when " +
		"switching between policies at runtime LRU and LFU data will take some time to adjust."
	// sharedRefcount is what Redis answers for its shared integers.
	sharedRefcount = 2147483647
)

func cmdObject(c *execCtx, args [][]byte) {
	switch sub := args[1]; {
	case eqFold(sub, "encoding") || eqFold(sub, "freq") || eqFold(sub, "idletime") || eqFold(sub, "refcount"):
		if len(args) != 3 {
			c.err(command.ErrArity("object|" + lowerName(sub)))
			return
		}
		// Like Redis's objectCommandLookup: no access is recorded.
		pos := c.peek(args[2])
		if pos < 0 {
			c.nullBulk()
			return
		}
		pol := c.ks.evict.Policy
		switch {
		case eqFold(sub, "encoding"):
			c.bulkStr(encodingName(c.ks, pos))
		case eqFold(sub, "freq"):
			if !pol.lfu() {
				c.err(errNotLFU)
				return
			}
			c.int(int64(lfuDecr(c.ks.acct.stat(pos), c.now)))
		case eqFold(sub, "idletime"):
			if pol.lfu() {
				c.err(errLFU)
				return
			}
			c.int(idleMs(c.ks.acct.stat(pos), c.now) / 1000)
		default:
			c.int(refcount(c.ks, pos))
		}
	case eqFold(args[1], "help"):
		if len(args) != 2 {
			c.err(command.ErrArity("object|help"))
			return
		}
		c.array(len(objectHelp))
		for _, line := range objectHelp {
			c.simple(line)
		}
	default:
		c.err("ERR unknown subcommand '" + string(args[1]) + "'. Try OBJECT HELP.")
	}
}

// encodingName is the OBJECT ENCODING answer for the key at pos.
func encodingName(ks *keyspace, pos int) string {
	if !ks.isSet(pos) {
		return ks.strEncoding(pos)
	}
	return ks.set(pos).Encoding().String()
}

// refcount is OBJECT REFCOUNT: Redis shares the integers 0..9999 between
// keys (and answers INT_MAX for them) unless maxmemory is set with an LRU or
// LFU policy, which needs an access field of each key's own.
func refcount(ks *keyspace, pos int) int64 {
	if ks.isSet(pos) {
		return 1
	}
	if ks.evict.MaxMemory != 0 && (ks.evict.Policy.lru() || ks.evict.Policy.lfu()) {
		return 1
	}
	v := ks.str(pos)
	if len(v) <= 4 {
		if n, ok := strictint.Parse(v); ok && n >= 0 && n < 10000 {
			return sharedRefcount
		}
	}
	return 1
}

// cmdTouch is TOUCH: EXISTS that records an access.
func cmdTouch(c *execCtx, args [][]byte) { existing(c, args, true) }

var memoryHelp = []string{
	"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return memory problems reports.",
	"MALLOC-STATS",
	"    Return internal statistics report from the memory allocator.",
	"PURGE",
	"    Attempt to purge dirty pages for reclamation by the allocator.",
	"STATS",
	"    Return information about the memory usage of the server.",
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value. Nested values are",
	"    sampled up to <count> times (default: 5, 0 means sample all).",
	"HELP",
	"    Prints this help.",
}

// cmdMemory serves MEMORY USAGE (the key's accounted bytes, what maxmemory
// counts for it: access.go) and MEMORY HELP. SAMPLES is checked and
// ignored: the accounting is exact, not sampled.
func cmdMemory(c *execCtx, args [][]byte) {
	switch {
	case eqFold(args[1], "usage"):
		if len(args) < 3 {
			c.err(command.ErrArity("memory|usage"))
			return
		}
		for i := 3; i < len(args); i += 2 {
			if !eqFold(args[i], "samples") || i+1 >= len(args) {
				c.err(command.ErrSyntax)
				return
			}
			if _, ok := parseInt(args[i+1]); !ok {
				c.err(command.ErrNotInteger)
				return
			}
		}
		pos := c.peek(args[2])
		if pos < 0 {
			c.nullBulk()
			return
		}
		c.int(c.ks.keyBytes(pos))
	case eqFold(args[1], "help") && len(args) == 2:
		c.array(len(memoryHelp))
		for _, line := range memoryHelp {
			c.simple(line)
		}
	default:
		c.err("ERR unknown subcommand or wrong number of arguments for '" + string(args[1]) + "'. Try MEMORY HELP.")
	}
}
