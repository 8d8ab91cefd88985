package fsm

// Written keys: the front end's CLIENT TRACKING must hear of every key an
// applied entry changed, on every replica (a client reading through a
// follower caches what the leader's writes change). The hook costs one
// atomic load per entry while nobody listens.

// WrittenFunc receives, after an entry is applied, the keys its commands
// changed or deleted (copies, in the order met, a key possibly repeated),
// and whether the entry emptied the keyspace (FLUSHALL, FLUSHDB, a snapshot
// or RDB load): then every key changed. It runs on the apply goroutine with
// the state machine locked, so it must only hand the keys over.
type WrittenFunc func(keys [][]byte, flushed bool)

// OnWritten installs fn (nil removes it).
func (f *FSM) OnWritten(fn WrittenFunc) {
	if fn == nil {
		f.written.Store(nil)
		return
	}
	f.written.Store(&fn)
}

// wrote records the key at pos as changed by the running entry.
func (c *execCtx) wrote(pos int) {
	if c.rec != nil {
		c.rec.keys = append(c.rec.keys, append([]byte(nil), c.ks.keys.At(pos)...))
	}
}

// written collects one entry's changed keys for the WrittenFunc.
type written struct {
	keys    [][]byte
	flushed bool
}

// notifyFlush tells the hook, if any, that every key changed (a snapshot or
// an RDB file replaced the keyspace).
func (f *FSM) notifyFlush() {
	if fn := f.written.Load(); fn != nil {
		(*fn)(nil, true)
	}
}
