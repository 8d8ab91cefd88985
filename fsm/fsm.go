package fsm

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"raftset/internal/acl"
	"raftset/internal/command"
	"raftset/internal/setenc"
	"raftset/snapshot"
)

// Config configures an FSM.
type Config struct {
	// Limits are the initial set-max-* thresholds; the zero value means
	// setenc.DefaultLimits(). They are replicated state from then on:
	// "config set" entries change them, and snapshots carry them.
	Limits setenc.Limits
	// Evict is the initial maxmemory configuration; the zero value means
	// DefaultEvictConfig(). Replicated state from then on, like Limits.
	Evict EvictConfig
	// Logger is named "fsm"; nil means hclog.NewNullLogger().
	Logger hclog.Logger
}

// ApplyResult is what Apply returns for a command entry: one complete RESP2
// reply per op of the entry, in order.
type ApplyResult struct {
	Replies [][]byte
}

// FSM is raftset's replicated state machine (a raft.FSM and
// raft.BatchingFSM). See the package documentation for the rules it keeps.
type FSM struct {
	log  hclog.Logger
	cmds map[string]*cmdDef // built in New; read-only afterwards

	// mu guards ks: Apply, Snapshot, Restore and Release take it for
	// writing, Read, WatchStamp, ExpiredKeys and Stats for reading.
	mu sync.RWMutex
	ks *keyspace

	// decMu guards dec, the reused storage of the entries ApplyBatch
	// decodes (Raft applies from one goroutine; the lock is for callers
	// that do not).
	decMu sync.Mutex
	dec   command.Decoder

	// warmKeys and warmPos are warm's reused storage (under mu).
	warmKeys [][]byte
	warmPos  []int

	applied   atomic.Uint64
	appliedMu sync.Mutex
	appliedCh chan struct{} // closed and replaced whenever applied grows

	auxMu       sync.Mutex
	auxFn       func() []snapshot.AuxField
	restoredAux []snapshot.AuxField

	// nodes is the id→client-address map (nodes.go), replaced, never
	// changed in place, under mu; readers load it without the lock.
	nodes atomic.Pointer[map[string]string]

	// users are the ACL users (acl.go), changed by Apply and Restore;
	// noUsers is a new node's users, marshaled.
	users   *acl.Registry
	noUsers []byte

	// halted is closed once Apply met an entry it cannot decode (haltErr
	// says which); from then on Apply applies nothing.
	halted   chan struct{}
	haltOnce sync.Once
	haltErr  error

	scripts scriptState // Lua interpreters and compiled scripts (cmd_script.go)

	counters counters                    // INFO stats (access.go)
	mem      memoryState                 // the accounted memory and maxmemory settings, lock-free (evict.go)
	written  atomic.Pointer[WrittenFunc] // OnWritten (written.go)
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an empty state machine.
func New(cfg Config) *FSM {
	if err := checkCellLayout(); err != nil {
		panic(err)
	}
	lim := cfg.Limits
	if lim == (setenc.Limits{}) {
		lim = setenc.DefaultLimits()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	f := &FSM{
		log:       logger.Named("fsm"),
		cmds:      newCommandTable(),
		ks:        newKeyspace(lim),
		appliedCh: make(chan struct{}),
		halted:    make(chan struct{}),
	}
	if cfg.Evict != (EvictConfig{}) {
		f.ks.evict = cfg.Evict
	}
	f.publishMemory()
	f.nodes.Store(&map[string]string{})
	f.users = newUsers()
	f.noUsers = f.users.Marshal()
	return f
}

// Apply applies one committed log entry. A command entry yields an
// *ApplyResult; other entry types yield nil. An entry that does not decode
// halts the state machine (see Halted): it cannot be skipped without letting
// this replica diverge from those that apply it.
func (f *FSM) Apply(l *raft.Log) interface{} {
	out := f.ApplyBatch([]*raft.Log{l})
	return out[0]
}

// ApplyBatch applies consecutive committed entries under one lock. The
// entries after one that does not decode are not applied.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	if f.isHalted() {
		return out
	}
	f.decMu.Lock()
	defer f.decMu.Unlock()
	defer f.dec.Reset() // nothing applied keeps an entry's ops or argument slices
	entries := make([]*command.Entry, len(logs))
	good := len(logs)
	var bad error
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		e, err := f.dec.Decode(l.Data)
		if err != nil {
			good, bad = i, err
			break
		}
		entries[i] = e
	}
	f.mu.Lock()
	for i, l := range logs[:good] {
		if res := f.applyLocked(l, entries[i]); res != nil {
			out[i] = res
		}
	}
	f.mu.Unlock()
	if good > 0 {
		f.setApplied(logs[good-1].Index)
	}
	if bad != nil {
		f.halt(logs[good], bad)
	}
	return out
}

// applyLocked runs entry e (nil for a non-command log) with f.mu held.
func (f *FSM) applyLocked(l *raft.Log, e *command.Entry) *ApplyResult {
	ks := f.ks
	ks.index, ks.term = l.Index, l.Term
	if e == nil {
		return nil
	}
	if e.Type == command.TypeNode {
		f.setNodeLocked(*e.Node)
		return &ApplyResult{}
	}
	ks.now = max(ks.now, e.NowMs)
	c := &execCtx{f: f, ks: ks, now: ks.now, index: l.Index, term: l.Term, applying: true,
		out: make([]byte, 0, 16*len(e.Ops))}
	hook := f.written.Load()
	if hook != nil {
		c.rec = &written{}
	}
	if e.Type == command.TypeSlot {
		c.write = true
		c.applySlot(e.Slot)
		if hook != nil && len(c.rec.keys) > 0 {
			(*hook)(c.rec.keys, false)
		}
		f.ks.acct.flush(f.ks)
		f.publishMemory()
		return &ApplyResult{Replies: [][]byte{c.out}}
	}
	res := &ApplyResult{Replies: make([][]byte, len(e.Ops))}
	ends := make([]int, len(e.Ops))
	f.warm(e.Ops)
	for i := range e.Ops {
		c.opPos = i
		c.src = nil
		if a, ok := e.Ops[i].LegacyNode(); ok {
			f.setNodeLocked(a) // and still answered as before: an unknown command
		}
		c.execOp(&e.Ops[i])
		ends[i] = len(c.out)
		// Re-measured now, while the op's key is in the cache: at the
		// entry's end, after a few hundred other keys, each re-measure was
		// a round of cache misses (2.6% of SPOP -P10's CPU). The total is
		// read only once the entry is applied, so it is the same.
		f.ks.acct.flush(f.ks)
	}
	if hook != nil && (len(c.rec.keys) > 0 || c.rec.flushed) {
		(*hook)(c.rec.keys, c.rec.flushed)
	}
	start := 0
	for i, end := range ends {
		res.Replies[i] = c.out[start:end:end]
		start = end
	}
	f.ks.acct.flush(f.ks)
	f.publishMemory()
	return res
}

// execOp appends the reply of one op of an entry.
func (c *execCtx) execOp(op *command.Op) {
	switch op.Kind {
	case command.OpCommand:
		c.exec(op.Args)
	case command.OpReply:
		c.out = append(c.out, op.Reply...)
	case command.OpTx:
		c.execTx(op.Tx)
	default:
		c.out = command.AppendError(c.out, "ERR unknown op kind")
	}
}

// execTx runs a MULTI/EXEC transaction: *-1 if a watched key changed since
// WATCH, else the array of its replies.
func (c *execCtx) execTx(tx *command.Tx) {
	if c.txSlotRefused(tx) {
		c.err(errSlotMoving)
		return
	}
	for _, w := range tx.Watches {
		exists, stamp := c.ks.stamp(w.Key, c.now)
		if exists != w.Exists || stamp != w.Stamp {
			c.out = append(c.out, command.NullArray...)
			return
		}
	}
	c.out = command.AppendArray(c.out, len(tx.Ops))
	for i := range tx.Ops {
		c.subPos = i + 1
		c.src = nil
		op := &tx.Ops[i]
		if op.Kind == command.OpTx {
			c.out = command.AppendError(c.out, "ERR MULTI calls can not be nested")
			continue
		}
		c.execOp(op)
	}
	c.subPos = 0
}

// stamp is what WATCH records for key: whether it exists at now and the
// index of its last change, or, when it does not exist, the index of the
// last deletion in the keyspace (any deletion or flush bumps it, so the
// comparison is conservative: it can abort a transaction needlessly, never
// miss a change).
func (ks *keyspace) stamp(key []byte, now int64) (bool, uint64) {
	pos := ks.find(key)
	if pos < 0 || ks.expiredAt(pos, now) {
		return false, ks.lastDel
	}
	return true, ks.ver(pos)
}

// Read runs a read-only command (or DEBUG DIGEST/DIGEST-VALUE) against the
// current state and appends its RESP2 reply to dst. Keys whose deadline is
// at or before max(nowMs, the state's clock) are hidden, never deleted:
// deleting is the leader's job, through the log. src makes SRANDMEMBER's
// and RANDOMKEY's choices; nil means a generator seeded from nowMs.
func (f *FSM) Read(args [][]byte, nowMs int64, src setenc.Source, dst []byte) []byte {
	if src == nil {
		src = rand.NewPCG(uint64(nowMs), 0x7261667473657421)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := &execCtx{f: f, ks: f.ks, now: max(nowMs, f.ks.now), src: src, out: dst, readOnly: true}
	c.exec(args)
	return c.out
}

// ReadBatch runs read-only commands as Read does, in order under one hold of
// the state's read lock, and sets out[i] to cmds[i]'s reply. The replies
// share one growing buffer, so a pipelined run of small replies costs a
// few allocations rather than one or more each, and one lock round trip.
// len(out) must be at least len(cmds).
func (f *FSM) ReadBatch(cmds [][][]byte, nowMs int64, src setenc.Source, out [][]byte) {
	if src == nil {
		src = rand.NewPCG(uint64(nowMs), 0x7261667473657421)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := &execCtx{f: f, ks: f.ks, now: max(nowMs, f.ks.now), src: src, readOnly: true}
	for i, args := range cmds {
		start := len(c.out)
		c.exec(args)
		// Capped at its end: a later append never writes into it, whether
		// it lands in this array or a grown copy.
		out[i] = c.out[start:len(c.out):len(c.out)]
	}
}

// WatchStamp returns what WATCH records for each key (see command.Watch);
// EXEC aborts unless every stamp is unchanged when it is applied.
func (f *FSM) WatchStamp(keys [][]byte) []command.Watch {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]command.Watch, len(keys))
	for i, k := range keys {
		exists, stamp := f.ks.stamp(k, f.ks.now)
		out[i] = command.Watch{Key: k, Exists: exists, Stamp: stamp}
	}
	return out
}

// AppliedIndex returns the index of the last log entry applied (or
// restored from a snapshot).
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Clock returns the state machine's clock (Unix ms): the newest entry time
// applied, which the node's cluster clock follows (cluster/clock.go).
func (f *FSM) Clock() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ks.now
}

// WaitApplied blocks until AppliedIndex() >= index or ctx ends. Only entries
// Raft hands to the FSM (commands and configuration changes) advance it: a
// caller waiting for a commit index that a no-op entry holds should use
// Raft's own applied index or a barrier.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.appliedMu.Lock()
		if f.applied.Load() >= index {
			f.appliedMu.Unlock()
			return nil
		}
		ch := f.appliedCh
		f.appliedMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setApplied records index as applied and wakes waiters. It never moves the
// index backwards except through Restore (force).
func (f *FSM) setApplied(index uint64) { f.storeApplied(index, false) }

func (f *FSM) storeApplied(index uint64, force bool) {
	f.appliedMu.Lock()
	defer f.appliedMu.Unlock()
	if index == f.applied.Load() || (!force && index < f.applied.Load()) {
		return
	}
	f.applied.Store(index)
	close(f.appliedCh)
	f.appliedCh = make(chan struct{})
}

// Limits returns the replicated set-max-* thresholds.
func (f *FSM) Limits() setenc.Limits {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ks.lim
}

// KeyspaceCounts returns the number of keys and of keys with a deadline,
// logically expired keys included (as DBSIZE and INFO keyspace count).
func (f *FSM) KeyspaceCounts() (keys, expires int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ks.Len(), f.ks.vol.Len()
}

// Stats is a summary of the state for INFO.
type Stats struct {
	Keys         int    // keys, logically expired ones included
	Expires      int    // keys with a deadline
	Strings      int    // keys by type and encoding
	Intsets      int    //
	Listpacks    int    //
	Hashtables   int    //
	AppliedIndex uint64 // last log index applied
	LastDelete   uint64 // index of the last deletion (the WATCH stamp of missing keys)
	ClockMs      int64  // the state machine's clock
	MemoryBytes  int64  // approximate heap bytes held by the keyspace
	Limits       setenc.Limits
}

// Stats walks the keyspace (one byte per key, plus the boxed sets) under the
// read lock.
func (f *FSM) Stats() Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	st := Stats{
		Keys: ks.Len(), Expires: ks.vol.Len(), AppliedIndex: f.applied.Load(),
		LastDelete: ks.lastDel, ClockMs: ks.now, Limits: ks.lim,
	}
	mem := int64(ks.keys.MemoryUsage() + ks.vol.MemoryUsage())
	mem += int64(len(ks.chunks)) * int64(unsafe.Sizeof(chunk{}))
	for i := range ks.Len() {
		if !ks.isSet(i) {
			st.Strings++
			if _, isInt := ks.strInt(i); !isInt {
				mem += int64(cap(ks.str(i)))
			}
			continue
		}
		s := ks.set(i)
		switch s.Encoding() {
		case setenc.Intset:
			st.Intsets++
		case setenc.Listpack:
			st.Listpacks++
		default:
			st.Hashtables++
		}
		mem += int64(s.MemoryUsage()) - 48 // MemoryUsage counts a header we do not have
	}
	st.MemoryBytes = mem
	return st
}
