package fsm

import (
	"math"
	"strconv"

	"raftset/internal/command"
)

// Expiry commands (redis/redis src/expire.c; docs/invariants.md §4).
// A key is logically expired when its deadline is at or before the clock.

// expireFlags are EXPIRE's NX/XX/GT/LT options.
type expireFlags struct{ nx, xx, gt, lt bool }

// parseExpireFlags is parseExtendedExpireArgumentsOrReply.
func parseExpireFlags(opts [][]byte) (expireFlags, string) {
	var f expireFlags
	for _, o := range opts {
		switch {
		case eqFold(o, "nx"):
			f.nx = true
		case eqFold(o, "xx"):
			f.xx = true
		case eqFold(o, "gt"):
			f.gt = true
		case eqFold(o, "lt"):
			f.lt = true
		default:
			return f, "ERR Unsupported option " + string(o)
		}
	}
	if f.nx && (f.xx || f.gt || f.lt) {
		return f, "ERR NX and XX, GT or LT options at the same time are not compatible"
	}
	if f.gt && f.lt {
		return f, "ERR GT and LT options at the same time are not compatible"
	}
	return f, ""
}

func (f expireFlags) args() [][]byte {
	var out [][]byte
	for _, o := range []struct {
		on   bool
		name string
	}{{f.nx, "nx"}, {f.xx, "xx"}, {f.gt, "gt"}, {f.lt, "lt"}} {
		if o.on {
			out = append(out, []byte(o.name))
		}
	}
	return out
}

func errExpireTime(cmd string) string { return "ERR invalid expire time in '" + cmd + "' command" }

// expireUnit says how an EXPIRE-family command reads its time argument.
type expireUnit struct {
	seconds  bool // seconds rather than milliseconds
	relative bool // added to the command's clock
}

var expireUnits = map[string]expireUnit{
	"expire":    {seconds: true, relative: true},
	"pexpire":   {relative: true},
	"expireat":  {seconds: true},
	"pexpireat": {},
}

// parseExpire is the state-independent part of expireGenericCommand: the
// options, then the time, converted to absolute milliseconds.
func parseExpire(name string, args [][]byte, now int64) (when int64, f expireFlags, msg string) {
	f, msg = parseExpireFlags(args[3:])
	if msg != "" {
		return 0, f, msg
	}
	when, ok := parseInt(args[2])
	if !ok {
		return 0, f, command.ErrNotInteger
	}
	u := expireUnits[name]
	if u.seconds {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			return 0, f, errExpireTime(name)
		}
		when *= 1000
	}
	if u.relative {
		if when > math.MaxInt64-now {
			return 0, f, errExpireTime(name)
		}
		when += now
	}
	return when, f, ""
}

// prepareExpire rewrites EXPIRE, PEXPIRE and EXPIREAT as PEXPIREAT.
func prepareExpire(args [][]byte, nowMs int64) ([][]byte, string) {
	name := lowerName(args[0])
	when, f, msg := parseExpire(name, args, nowMs)
	if msg != "" {
		return nil, msg
	}
	out := [][]byte{[]byte("pexpireat"), args[1], strconv.AppendInt(nil, when, 10)}
	return append(out, f.args()...), ""
}

func cmdExpire(c *execCtx, args [][]byte) {
	when, f, msg := parseExpire(lowerName(args[0]), args, c.now)
	if msg != "" {
		c.err(msg)
		return
	}
	pos := c.lookup(args[1])
	if pos < 0 {
		c.int(0)
		return
	}
	cur := c.ks.exp(pos)
	switch {
	case f.nx && cur != noExpiry,
		f.xx && cur == noExpiry,
		f.gt && (cur == noExpiry || when <= cur),
		f.lt && cur != noExpiry && when >= cur:
		c.int(0)
		return
	}
	if when <= c.now {
		c.deleteAt(pos)
	} else {
		c.ks.setExpire(pos, when)
		c.touch(pos)
	}
	c.int(1)
}

// ttlReply is ttlGenericCommand: -2 missing, -1 no deadline, else the
// remaining (or absolute) time, seconds rounded half up.
func ttlReply(c *execCtx, key []byte, ms, abs bool) {
	pos := c.lookup(key)
	if pos < 0 {
		c.int(-2)
		return
	}
	e := c.ks.exp(pos)
	if e == noExpiry {
		c.int(-1)
		return
	}
	t := e
	if !abs {
		t = e - c.now
	}
	t = max(t, 0)
	if !ms {
		t = (t + 500) / 1000
	}
	c.int(t)
}

func cmdTTL(c *execCtx, args [][]byte)         { ttlReply(c, args[1], false, false) }
func cmdPTTL(c *execCtx, args [][]byte)        { ttlReply(c, args[1], true, false) }
func cmdExpireTime(c *execCtx, args [][]byte)  { ttlReply(c, args[1], false, true) }
func cmdPExpireTime(c *execCtx, args [][]byte) { ttlReply(c, args[1], true, true) }

func cmdPersist(c *execCtx, args [][]byte) {
	pos := c.lookup(args[1])
	if pos < 0 || c.ks.exp(pos) == noExpiry {
		c.int(0)
		return
	}
	c.ks.setExpire(pos, noExpiry)
	c.touch(pos)
	c.int(1)
}

// cmdRaftsetExpire is the leader's active expiry, "raftset.expire key...":
// each key is deleted only if it is still expired at this entry's clock.
// The reply is the number deleted.
func cmdRaftsetExpire(c *execCtx, args [][]byte) {
	n := 0
	for _, k := range args[1:] {
		if pos := c.ks.find(k); pos >= 0 && c.ks.expiredAt(pos, c.now) && !c.ks.slotHeld(k) {
			c.deleteAt(pos)
			n++
		}
	}
	c.f.counters.expired.Add(uint64(n))
	c.int(int64(n))
}

// lowerName returns the lower-case command name (ASCII).
func lowerName(b []byte) string {
	out := make([]byte, len(b))
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		out[i] = ch
	}
	return string(out)
}
