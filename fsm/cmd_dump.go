package fsm

import (
	"bytes"
	"errors"
	"math"

	"raftset/internal/command"
	"raftset/snapshot"
)

// COPY, DUMP and RESTORE (redis/redis src/db.c copyCommand, src/cluster.c
// dumpCommand and restoreCommand).

// cmdCopy copies the value and its deadline. raftset has one database: DB 0
// is the only destination; any other index answers "DB index is out of
// range", as Redis does for an index beyond its databases setting.
func cmdCopy(c *execCtx, args [][]byte) {
	replace := false
	for j := 3; j < len(args); j++ {
		switch {
		case eqFold(args[j], "replace"):
			replace = true
		case eqFold(args[j], "db") && j+1 < len(args):
			db, ok := parseInt(args[j+1])
			if !ok || db < math.MinInt32 || db > math.MaxInt32 {
				c.err(command.ErrNotInteger)
				return
			}
			if db != 0 {
				c.err("ERR DB index is out of range")
				return
			}
			j++
		default:
			c.err(command.ErrSyntax)
			return
		}
	}
	src, dst := args[1], args[2]
	if bytes.Equal(src, dst) {
		c.err("ERR source and destination objects are the same")
		return
	}
	sp := c.lookup(src)
	if sp < 0 {
		c.int(0)
		return
	}
	if dp := c.lookup(dst); dp >= 0 {
		if !replace {
			c.int(0)
			return
		}
		c.deleteAt(dp)
	}
	sp = c.ks.find(src) // the deletion may have moved it
	exp := c.ks.exp(sp)
	var np int
	if c.isSet(sp) {
		np = c.ks.addSet(dst, c.ks.set(sp).Clone(), exp)
	} else {
		np = c.ks.copyString(dst, sp, exp)
	}
	c.touch(np)
	c.int(1)
}

func cmdDump(c *execCtx, args [][]byte) {
	pos := c.lookup(args[1])
	switch {
	case pos < 0:
		c.nullBulk()
	case c.isSet(pos):
		c.bulk(snapshot.Dump(nil, c.ks.set(pos)))
	default:
		c.bulk(snapshot.Dump(c.ks.str(pos), nil))
	}
}

// cmdRestore is restoreCommand, checks in Redis's order. A relative TTL is
// added to the entry's clock, the same on every replica. IDLETIME and FREQ
// are checked and then ignored: raftset keeps no LRU or LFU data.
func cmdRestore(c *execCtx, args [][]byte) {
	var replace, absTTL, idle, freq bool
	for j := 4; j < len(args); j++ {
		more := j+1 < len(args)
		switch {
		case eqFold(args[j], "replace"):
			replace = true
		case eqFold(args[j], "absttl"):
			absTTL = true
		case eqFold(args[j], "idletime") && more && !freq:
			n, ok := parseInt(args[j+1])
			if !ok {
				c.err(command.ErrNotInteger)
				return
			}
			if n < 0 {
				c.err("ERR Invalid IDLETIME value, must be >= 0")
				return
			}
			idle = true
			j++
		case eqFold(args[j], "freq") && more && !idle:
			n, ok := parseInt(args[j+1])
			if !ok {
				c.err(command.ErrNotInteger)
				return
			}
			if n < 0 || n > 255 {
				c.err("ERR Invalid FREQ value, must be >= 0 and <= 255")
				return
			}
			freq = true
			j++
		default:
			c.err(command.ErrSyntax)
			return
		}
	}
	key := args[1]
	if !replace && c.lookup(key) >= 0 {
		c.err("BUSYKEY Target key name already exists.")
		return
	}
	ttl, ok := parseInt(args[2])
	if !ok {
		c.err(command.ErrNotInteger)
		return
	}
	if ttl < 0 {
		c.err("ERR Invalid TTL value, must be >= 0")
		return
	}
	rec, err := snapshot.Undump(args[3], c.ks.lim)
	switch {
	case errors.Is(err, snapshot.ErrDumpPayload):
		c.err("ERR DUMP payload version or checksum are wrong")
		return
	case errors.Is(err, snapshot.ErrUnsupportedType):
		var ute *snapshot.UnsupportedTypeError
		errors.As(err, &ute)
		c.err("ERR raftset holds strings and sets only: cannot restore a " + snapshot.TypeName(ute.Type) + " value")
		return
	case err != nil:
		c.err("ERR Bad data format")
		return
	}
	if replace {
		if pos := c.lookup(key); pos >= 0 {
			c.deleteAt(pos)
		}
	}
	exp := noExpiry
	if ttl != 0 {
		exp = ttl
		if !absTTL {
			if ttl > math.MaxInt64-c.now {
				exp = math.MaxInt64
			} else {
				exp = ttl + c.now
			}
		}
		if exp <= c.now {
			// Already expired: Redis answers OK and stores nothing.
			c.ok()
			return
		}
	}
	var pos int
	if rec.Kind == snapshot.KindSet {
		pos = c.ks.addSet(key, rec.Set, exp)
	} else {
		pos = c.ks.addString(key, rec.Value, exp)
	}
	c.touch(pos)
	c.ok()
}
