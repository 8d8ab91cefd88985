package fsm

import (
	"bytes"
	"math/rand/v2"

	"raftset/internal/command"
	"raftset/internal/setenc"
	"raftset/internal/strictint"
)

// execCtx runs commands against one keyspace: inside Apply (applying, with
// the entry's index, term and clock) or for Read (readOnly, with the
// caller's clock and random source). Replies are appended to out.
type execCtx struct {
	f     *FSM
	ks    *keyspace
	now   int64
	index uint64
	term  uint64
	// opPos and subPos (1-based inside a transaction) locate the command in
	// its entry; with index and term they seed its random generator.
	opPos, subPos int
	applying      bool // inside Apply
	readOnly      bool // inside Read: write commands are refused
	write         bool // the running command may change state
	src           setenc.Source
	// pcg is the generator rng seeds inside Apply, kept in the context so
	// that a SPOP costs no allocation for it (the seeding, and so every
	// draw, is what rand.NewPCG(index, seed2) would give).
	pcg rand.PCG
	// scratch holds a popped member until it is copied into out.
	scratch []byte
	out     []byte
	rec     *written // keys changed, for OnWritten (written.go); nil: nobody listens
}

// cmdDef is one entry of the dispatch table.
type cmdDef struct {
	name  string
	arity int  // Redis convention: negative means at least -arity
	write bool // changes state: only through the log
	run   func(c *execCtx, args [][]byte)
	// prepare, if set, validates a write without state before it is
	// proposed and may rewrite it (relative times to absolute ones). It
	// returns the args to propose, or an error reply text.
	prepare func(args [][]byte, nowMs int64) ([][]byte, string)
	// readOK lets a write command run on the read path all the same: EVAL
	// of a script whose shebang declares no-writes (refused inside if it
	// tries to write).
	readOK bool
	// keys finds the command's keys (nil: it has none), so that a command
	// on a slot this shard does not serve is refused (slots.go).
	keys func(args [][]byte) [][]byte
}

// errWriteInRead is the reply to a write command sent to Read.
const errWriteInRead = "ERR write command sent to the read path"

// exec runs one command (args[0] is its name, in any case).
func (c *execCtx) exec(args [][]byte) {
	if len(args) == 0 {
		c.err(command.ErrUnknownCommand("", nil))
		return
	}
	def := c.f.lookupCmd(args[0])
	if def == nil {
		c.err(command.ErrUnknownCommand(string(args[0]), args[1:]))
		return
	}
	if !arityOK(def.arity, len(args)) {
		c.err(command.ErrArity(def.name))
		return
	}
	if def.write && c.readOnly && !def.readOK {
		c.err(errWriteInRead)
		return
	}
	if c.slotRefused(def, args) {
		c.err(errSlotMoving)
		return
	}
	c.write = def.write && c.applying
	def.run(c, args)
	c.write = false
}

func (f *FSM) lookupCmd(name []byte) *cmdDef {
	def, _ := command.LookupFold(f.cmds, name)
	return def
}

func arityOK(arity, argc int) bool {
	if arity >= 0 {
		return argc == arity
	}
	return argc >= -arity
}

// Prepare validates a write command without looking at state, on the leader
// before it is proposed, and rewrites relative times into absolute
// milliseconds computed from nowMs: EXPIRE, PEXPIRE and EXPIREAT become
// PEXPIREAT with the same NX/XX/GT/LT options; SET with EX, PX or EXAT,
// SETEX and PSETEX become SET ... PXAT; GETEX with EX, PX or EXAT becomes
// GETEX ... PXAT. A syntax, option or range error comes back as an OpReply
// op carrying the reply the original command gives, so it never reaches the
// log as a command. The command name is lower-cased. Prepare takes no lock.
func (f *FSM) Prepare(args [][]byte, nowMs int64) command.Op {
	if len(args) == 0 {
		return errOp(command.ErrUnknownCommand("", nil))
	}
	def := f.lookupCmd(args[0])
	if def == nil {
		return errOp(command.ErrUnknownCommand(string(args[0]), args[1:]))
	}
	if !arityOK(def.arity, len(args)) {
		return errOp(command.ErrArity(def.name))
	}
	if def.name == "acl" {
		return f.prepareACL(args)
	}
	out := args
	if def.prepare != nil {
		var msg string
		out, msg = def.prepare(args, nowMs)
		if msg != "" {
			return errOp(msg)
		}
	}
	// The name stays as the client sent it: Apply looks it up in any case, and
	// copying the arguments to lower-case it cost an allocation per write.
	return command.Op{Kind: command.OpCommand, Args: out}
}

func errOp(msg string) command.Op {
	return command.Op{Kind: command.OpReply, Reply: command.Error(msg)}
}

// rng returns the command's random generator. Inside Apply it is seeded
// from the entry's index and term and the command's position, so every
// replica draws the same numbers; Read uses the caller's source.
func (c *execCtx) rng() setenc.Source {
	if c.src == nil {
		seed2 := c.term*0x9e3779b97f4a7c15 ^ uint64(c.opPos)<<20 ^ uint64(c.subPos)
		c.pcg.Seed(c.index, seed2)
		c.src = &c.pcg
	}
	return c.src
}

// --- key access -----------------------------------------------------------

// lookup returns the position of key, or -1 if it is missing or logically
// expired. A write command applied from the log deletes an expired key it
// meets, as part of the write; reads only hide it.
func (c *execCtx) lookup(key []byte) int { return c.lookupKey(key, true) }

// lookupKey is lookup; touch false does not record an access to the key
// (Redis's LOOKUP_NOTOUCH: EXISTS, TYPE). A read counts a keyspace hit or
// miss either way.
func (c *execCtx) lookupKey(key []byte, touch bool) int {
	pos := c.peek(key)
	if !c.write {
		if pos < 0 {
			c.f.counters.misses.Add(1)
		} else {
			c.f.counters.hits.Add(1)
		}
	}
	if pos >= 0 && touch {
		c.ks.acct.touch(pos, c.now, c.ks.evict.Policy.lfu())
	}
	return pos
}

// peek is lookup without counting a hit or miss or updating the key's
// access statistic (OBJECT, MEMORY USAGE, and Redis's LOOKUP_NOTOUCH).
func (c *execCtx) peek(key []byte) int {
	pos := c.ks.find(key)
	if pos < 0 {
		return -1
	}
	if c.ks.expiredAt(pos, c.now) {
		if c.write {
			c.deleteAt(pos)
			c.f.counters.expired.Add(1)
		}
		return -1
	}
	return pos
}

// deleteAt removes the key at pos. Positions of other keys may change (the
// last key moves into the hole), so callers find keys again afterwards.
func (c *execCtx) deleteAt(pos int) {
	c.wrote(pos)
	c.ks.remove(pos)
	c.ks.lastDel = c.index
}

// touch records that the key at pos changed in this entry (its WATCH stamp).
func (c *execCtx) touch(pos int) {
	c.ks.setVer(pos, c.index)
	c.wrote(pos)
}

func (c *execCtx) isSet(pos int) bool { return c.ks.isSet(pos) }

// insertSet adds key (absent) holding s, which the keyspace now owns.
func (c *execCtx) insertSet(key []byte, s *setenc.Set) int {
	pos := c.ks.addSet(key, s, noExpiry)
	c.touch(pos)
	return pos
}

// storeSet makes key hold s (a new set the keyspace now owns), replacing
// any value and deadline, as the *STORE commands do.
func (c *execCtx) storeSet(key []byte, s *setenc.Set) {
	pos := c.lookup(key)
	if pos < 0 {
		c.insertSet(key, s)
		return
	}
	c.ks.putSet(pos, s)
	c.ks.setExpire(pos, noExpiry)
	c.touch(pos)
}

// setString makes key hold a copy of val. keepTTL keeps an existing
// deadline; otherwise the deadline becomes exp (noExpiry for none).
func (c *execCtx) setString(key, val []byte, keepTTL bool, exp int64) {
	pos := c.lookup(key)
	// An integer is stored as one (encContent): no copy of its text.
	b := val
	if _, isInt := contentInt(val); !isInt {
		b = bytes.Clone(val)
	}
	if pos < 0 {
		pos = c.ks.addString(key, b, exp)
	} else {
		c.ks.putString(pos, b)
		if !keepTTL {
			c.ks.setExpire(pos, exp)
		}
	}
	c.touch(pos)
}

// setsFor looks up keys as sets for SINTER, SUNION, SDIFF and their STORE
// forms: nil stands for a missing key, and the same key yields the same
// *Set (SDIFF and SINTER compare sets by identity). The sets are copies of
// the cells (sharing their contents), so the lookups' expiry deletions
// cannot move them. It appends WRONGTYPE and returns false on the first key
// holding a string.
func (c *execCtx) setsFor(keys [][]byte) ([]*setenc.Set, bool) {
	sets := make([]*setenc.Set, len(keys))
	copies := make([]setenc.Set, len(keys))
	var seen map[string]*setenc.Set
	if len(keys) > 8 {
		seen = make(map[string]*setenc.Set, len(keys))
	}
	for i, k := range keys {
		if seen != nil {
			if s, ok := seen[string(k)]; ok {
				sets[i] = s
				continue
			}
		} else if j := indexKey(keys[:i], k); j >= 0 {
			sets[i] = sets[j]
			continue
		}
		pos := c.lookup(k)
		if pos >= 0 {
			if !c.isSet(pos) {
				c.wrongType()
				return nil, false
			}
			copies[i] = *c.ks.set(pos)
			sets[i] = &copies[i]
		}
		if seen != nil {
			seen[string(k)] = sets[i]
		}
	}
	return sets, true
}

func indexKey(keys [][]byte, k []byte) int {
	for i, x := range keys {
		if bytes.Equal(x, k) {
			return i
		}
	}
	return -1
}

// --- replies ----------------------------------------------------------------

func (c *execCtx) err(msg string)  { c.out = command.AppendError(c.out, msg) }
func (c *execCtx) wrongType()      { c.err(command.ErrWrongType) }
func (c *execCtx) int(n int64)     { c.out = command.AppendInt(c.out, n) }
func (c *execCtx) bulk(b []byte)   { c.out = command.AppendBulk(c.out, b) }
func (c *execCtx) array(n int)     { c.out = command.AppendArray(c.out, n) }
func (c *execCtx) simple(s string) { c.out = command.AppendSimple(c.out, s) }
func (c *execCtx) raw(b []byte)    { c.out = append(c.out, b...) }
func (c *execCtx) ok()             { c.raw(command.OK) }
func (c *execCtx) nullBulk()       { c.raw(command.NullBulk) }
func (c *execCtx) emptyArray()     { c.raw(command.EmptyArr) }
func (c *execCtx) bool(b bool) {
	if b {
		c.raw(command.One)
	} else {
		c.raw(command.Zero)
	}
}
func (c *execCtx) bulkStr(s string)   { c.out = command.AppendBulkString(c.out, s) }
func parseInt(b []byte) (int64, bool) { return strictint.Parse(b) }

// bulkList gathers bulk strings whose count is not known in advance.
type bulkList struct {
	buf []byte
	n   int
}

func (l *bulkList) add(b []byte) { l.buf = command.AppendBulk(l.buf, b); l.n++ }

func (c *execCtx) list(l *bulkList) {
	c.array(l.n)
	c.raw(l.buf)
}

// eqFold reports whether b equals the lower-case ASCII word s, ignoring case.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		ch := b[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != s[i] {
			return false
		}
	}
	return true
}
