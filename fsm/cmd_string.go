package fsm

import (
	"math"
	"strconv"

	"raftset/internal/command"
)

// String commands (redis/redis src/t_string.c).

const errTooBig = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"

// stringOpts are the options of SET (and GETEX's subset), as
// parseExtendedStringArgumentsOrReply reads them.
type stringOpts struct {
	nx, xx, get, keepTTL, persist bool
	expKind                       byte // 0, or 'e' EX, 'p' PX, 'E' EXAT, 'P' PXAT
	expArg                        []byte
}

// parseStringOpts reads options from args[start:]; forSet selects SET's
// options (NX, XX, GET, KEEPTTL) over GETEX's (PERSIST). Any repeat or
// conflict Redis refuses is a syntax error.
func parseStringOpts(args [][]byte, start int, forSet bool) (stringOpts, string) {
	var o stringOpts
	for j := start; j < len(args); j++ {
		a := args[j]
		hasNext := j+1 < len(args)
		exp := func(kind byte) bool {
			if o.keepTTL || o.persist || !hasNext {
				return false
			}
			for _, k := range []byte{'e', 'p', 'E', 'P'} {
				if k != kind && o.expKind == k {
					return false
				}
			}
			o.expKind, o.expArg = kind, args[j+1]
			j++
			return true
		}
		switch {
		case forSet && eqFold(a, "nx") && !o.xx:
			o.nx = true
		case forSet && eqFold(a, "xx") && !o.nx:
			o.xx = true
		case forSet && eqFold(a, "get"):
			o.get = true
		case forSet && eqFold(a, "keepttl") && !o.persist && o.expKind == 0:
			o.keepTTL = true
		case !forSet && eqFold(a, "persist") && o.expKind == 0 && !o.keepTTL:
			o.persist = true
		case eqFold(a, "ex") && exp('e'):
		case eqFold(a, "px") && exp('p'):
		case eqFold(a, "exat") && exp('E'):
		case eqFold(a, "pxat") && exp('P'):
		default:
			return o, command.ErrSyntax
		}
	}
	return o, ""
}

// expireMs is getExpireMillisecondsOrReply: the option's value as an
// absolute Unix time in ms. It must be a positive integer, and neither the
// seconds conversion nor the addition of now may overflow; errors name cmd.
func expireMs(cmd string, kind byte, arg []byte, now int64) (int64, string) {
	ms, ok := parseInt(arg)
	if !ok {
		return 0, command.ErrNotInteger
	}
	seconds := kind == 'e' || kind == 'E'
	if ms <= 0 || (seconds && ms > math.MaxInt64/1000) {
		return 0, errExpireTime(cmd)
	}
	if seconds {
		ms *= 1000
	}
	if kind == 'e' || kind == 'p' {
		if ms > math.MaxInt64-now {
			return 0, errExpireTime(cmd)
		}
		ms += now
	}
	return ms, ""
}

func prepareSet(args [][]byte, nowMs int64) ([][]byte, string) {
	o, msg := parseStringOpts(args, 3, true)
	if msg != "" {
		return nil, msg
	}
	if len(args[2]) > maxStringBytes {
		return nil, errTooBig
	}
	out := [][]byte{[]byte("set"), args[1], args[2]}
	switch {
	case o.nx:
		out = append(out, []byte("nx"))
	case o.xx:
		out = append(out, []byte("xx"))
	}
	if o.get {
		out = append(out, []byte("get"))
	}
	switch {
	case o.expKind != 0:
		ms, msg := expireMs("set", o.expKind, o.expArg, nowMs)
		if msg != "" {
			return nil, msg
		}
		out = append(out, []byte("pxat"), strconv.AppendInt(nil, ms, 10))
	case o.keepTTL:
		out = append(out, []byte("keepttl"))
	}
	return out, ""
}

func cmdSet(c *execCtx, args [][]byte) {
	o, msg := parseStringOpts(args, 3, true)
	if msg != "" {
		c.err(msg)
		return
	}
	exp := noExpiry
	if o.expKind != 0 {
		if exp, msg = expireMs("set", o.expKind, o.expArg, c.now); msg != "" {
			c.err(msg)
			return
		}
	}
	setGeneric(c, args[1], args[2], o, exp, command.OK, command.NullBulk)
}

// setGeneric is setGenericCommand after the expire time was validated.
func setGeneric(c *execCtx, key, val []byte, o stringOpts, exp int64, okReply, abortReply []byte) {
	if len(val) > maxStringBytes {
		c.err(errTooBig)
		return
	}
	pos := c.lookup(key)
	if o.get {
		switch {
		case pos < 0:
			c.nullBulk()
		case c.isSet(pos):
			c.wrongType()
			return
		default:
			c.bulk(c.ks.str(pos))
		}
	}
	if (o.nx && pos >= 0) || (o.xx && pos < 0) {
		if !o.get {
			c.raw(abortReply)
		}
		return
	}
	c.setString(key, val, o.keepTTL, exp)
	if !o.get {
		c.raw(okReply)
	}
}

// prepareSetEx rewrites SETEX and PSETEX as SET key value PXAT ms.
func prepareSetEx(args [][]byte, nowMs int64) ([][]byte, string) {
	name := lowerName(args[0])
	kind := byte('e')
	if name == "psetex" {
		kind = 'p'
	}
	ms, msg := expireMs(name, kind, args[2], nowMs)
	if msg != "" {
		return nil, msg
	}
	if len(args[3]) > maxStringBytes {
		return nil, errTooBig
	}
	return [][]byte{[]byte("set"), args[1], args[3], []byte("pxat"), strconv.AppendInt(nil, ms, 10)}, ""
}

func cmdSetEx(c *execCtx, args [][]byte) {
	name := lowerName(args[0])
	kind := byte('e')
	if name == "psetex" {
		kind = 'p'
	}
	ms, msg := expireMs(name, kind, args[2], c.now)
	if msg != "" {
		c.err(msg)
		return
	}
	setGeneric(c, args[1], args[3], stringOpts{}, ms, command.OK, nil)
}

func cmdSetNX(c *execCtx, args [][]byte) {
	setGeneric(c, args[1], args[2], stringOpts{nx: true}, noExpiry, command.One, command.Zero)
}

// readString looks up key for a string read: its value, or nil after
// appending a null (missing) or WRONGTYPE.
func (c *execCtx) readString(key []byte) ([]byte, int) {
	pos := c.lookup(key)
	if pos < 0 {
		c.nullBulk()
		return nil, -1
	}
	if c.isSet(pos) {
		c.wrongType()
		return nil, -1
	}
	return c.ks.str(pos), pos
}

func cmdGet(c *execCtx, args [][]byte) {
	if v, pos := c.readString(args[1]); pos >= 0 {
		c.bulk(v)
	}
}

func cmdGetDel(c *execCtx, args [][]byte) {
	if v, pos := c.readString(args[1]); pos >= 0 {
		c.bulk(v)
		c.deleteAt(pos)
	}
}

func prepareGetEx(args [][]byte, nowMs int64) ([][]byte, string) {
	o, msg := parseStringOpts(args, 2, false)
	if msg != "" {
		return nil, msg
	}
	switch {
	case o.expKind != 0:
		ms, msg := expireMs("getex", o.expKind, o.expArg, nowMs)
		if msg != "" {
			// Redis checks the time only once it found a string at the key,
			// so the state machine decides: propose the command unchanged.
			return args, ""
		}
		return [][]byte{[]byte("getex"), args[1], []byte("pxat"), strconv.AppendInt(nil, ms, 10)}, ""
	case o.persist:
		return [][]byte{[]byte("getex"), args[1], []byte("persist")}, ""
	}
	return [][]byte{[]byte("getex"), args[1]}, ""
}

func cmdGetEx(c *execCtx, args [][]byte) {
	o, msg := parseStringOpts(args, 2, false)
	if msg != "" {
		c.err(msg)
		return
	}
	v, pos := c.readString(args[1])
	if pos < 0 {
		return
	}
	ms := noExpiry
	if o.expKind != 0 {
		if ms, msg = expireMs("getex", o.expKind, o.expArg, c.now); msg != "" {
			c.err(msg)
			return
		}
	}
	c.bulk(v)
	switch {
	case (o.expKind == 'E' || o.expKind == 'P') && ms <= c.now:
		c.deleteAt(pos)
	case o.expKind != 0:
		c.ks.setExpire(pos, ms)
		c.touch(pos)
	case o.persist && c.ks.exp(pos) != noExpiry:
		c.ks.setExpire(pos, noExpiry)
		c.touch(pos)
	}
}

func cmdMGet(c *execCtx, args [][]byte) {
	c.array(len(args) - 1)
	for _, k := range args[1:] {
		if pos := c.lookup(k); pos >= 0 && !c.isSet(pos) {
			c.bulk(c.ks.str(pos))
		} else {
			c.nullBulk()
		}
	}
}

func prepareMSet(args [][]byte, _ int64) ([][]byte, string) {
	if len(args)%2 == 0 {
		return nil, command.ErrArity("mset")
	}
	for i := 2; i < len(args); i += 2 {
		if len(args[i]) > maxStringBytes {
			return nil, errTooBig
		}
	}
	return args, ""
}

func cmdMSet(c *execCtx, args [][]byte) {
	if _, msg := prepareMSet(args, 0); msg != "" {
		c.err(msg)
		return
	}
	for i := 1; i < len(args); i += 2 {
		c.setString(args[i], args[i+1], false, noExpiry)
	}
	c.ok()
}

func cmdIncr(c *execCtx, args [][]byte) { incrDecr(c, args[1], 1) }
func cmdDecr(c *execCtx, args [][]byte) { incrDecr(c, args[1], -1) }

// parseIncrBy reads INCRBY's or DECRBY's amount as the increment to apply.
func parseIncrBy(args [][]byte) (int64, string) {
	n, ok := parseInt(args[2])
	if !ok {
		return 0, command.ErrNotInteger
	}
	if lowerName(args[0]) == "decrby" {
		if n == math.MinInt64 {
			return 0, "ERR decrement would overflow"
		}
		n = -n
	}
	return n, ""
}

func cmdIncrBy(c *execCtx, args [][]byte) {
	n, msg := parseIncrBy(args)
	if msg != "" {
		c.err(msg)
		return
	}
	incrDecr(c, args[1], n)
}

// incrDecr is incrDecrCommand: the deadline stays.
func incrDecr(c *execCtx, key []byte, incr int64) {
	pos := c.lookup(key)
	var v int64
	if pos >= 0 {
		if c.isSet(pos) {
			c.wrongType()
			return
		}
		var ok bool
		if v, ok = c.ks.strInt(pos); !ok {
			// Bytes that spell an integer (after APPEND or INCRBYFLOAT).
			if v, ok = parseInt(c.ks.str(pos)); !ok {
				c.err(command.ErrNotInteger)
				return
			}
		}
	}
	if (incr < 0 && v < 0 && incr < math.MinInt64-v) || (incr > 0 && v > 0 && incr > math.MaxInt64-v) {
		c.err(command.ErrOverflow)
		return
	}
	v += incr
	if pos < 0 {
		pos = c.ks.addInt(key, v, noExpiry)
	} else {
		c.ks.putInt(pos, v)
	}
	c.touch(pos)
	c.int(v)
}
