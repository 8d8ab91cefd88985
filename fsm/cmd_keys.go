package fsm

import (
	"bytes"
	"math"
	"strconv"

	"raftset/internal/command"
	"raftset/internal/glob"
	"raftset/internal/setenc"
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

// cmdExists serves EXISTS and TOUCH: repeated keys count each time.
func cmdExists(c *execCtx, args [][]byte) {
	n := 0
	for _, k := range args[1:] {
		if c.lookup(k) >= 0 {
			n++
		}
	}
	c.int(int64(n))
}

func cmdType(c *execCtx, args [][]byte) {
	pos := c.lookup(args[1])
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
	"HELP",
	"    Prints this help.",
}

func cmdObject(c *execCtx, args [][]byte) {
	switch {
	case eqFold(args[1], "encoding"):
		if len(args) != 3 {
			c.err(command.ErrArity("object|encoding"))
			return
		}
		pos := c.lookup(args[2])
		if pos < 0 {
			c.nullBulk()
			return
		}
		c.bulkStr(encodingName(c.ks, pos))
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
