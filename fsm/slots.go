package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/command"
	"raftset/internal/setenc"
	"raftset/internal/slot"
	"raftset/snapshot"
)

// Slot migration (docs/sharding.md, Moving a slot): the state machine's
// side. Each hash slot is in one of four states, changed only by TypeSlot
// entries, so that every replica agrees at every log position on whether
// this shard serves a slot:
//
//	owned      reads and writes served (every slot, until a slot entry says otherwise)
//	frozen     migrating out: reads served, writes refused (freeze ... abort, unfreeze, drop)
//	importing  keys arriving from the slot's owner: refused to clients (import ... own, drop)
//	unowned    another shard's: refused (drop ... import, own)
//
// A refused command gets Redis's -TRYAGAIN (errSlotMoving): it was
// certainly not applied and the client may retry, by which time the
// front end's cluster map may send it elsewhere (-MOVED). Each slot also
// records the epoch of the last migration step applied to it; a step of
// an older epoch is refused, a repeat of the current one is a no-op (or, for
// import, replaces the keys it carries), so a driver that fails over can
// resend any step. An abort (SlotAbort) sets the epoch of the slots it
// finds owned too, so that no step of the move it aborted can follow it.

// errSlotMoving is Redis Cluster's -TRYAGAIN text (src/cluster.c,
// getNodeByQuery's CLUSTER_REDIR_UNSTABLE), the error cluster clients retry.
const errSlotMoving = "TRYAGAIN Multiple keys request during rehashing of slot"

type slotState uint8

const (
	slotOwned slotState = iota
	slotFrozen
	slotImporting
	slotUnowned
)

var slotStateNames = [...]string{"owned", "frozen", "importing", "unowned"}

func (s slotState) String() string { return slotStateNames[s] }

// slotStates is every slot's state and epoch. The keyspace holds none
// (nil) until the first slot entry: a shard that never migrates pays
// nothing, and its snapshots are unchanged.
type slotStates struct {
	state [slot.Count]slotState
	epoch [slot.Count]uint64
	// busy counts the slots that are not owned: while it is 0 no command
	// needs its keys' slots checked.
	busy int
	// moving counts the frozen and importing slots: while it is not 0,
	// FLUSHALL is refused (it would empty a slot mid-copy).
	moving int
}

func (ks *keyspace) slotState(s int) (slotState, uint64) {
	if ks.slots == nil {
		return slotOwned, 0
	}
	return ks.slots.state[s], ks.slots.epoch[s]
}

func (ks *keyspace) setSlot(s int, st slotState, epoch uint64) {
	if ks.slots == nil {
		ks.slots = &slotStates{}
	}
	x := ks.slots
	old := x.state[s]
	x.busy += b2i(st != slotOwned) - b2i(old != slotOwned)
	x.moving += b2i(st == slotFrozen || st == slotImporting) - b2i(old == slotFrozen || old == slotImporting)
	x.state[s], x.epoch[s] = st, epoch
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// --- refusing commands -----------------------------------------------------

// slotHeld reports whether key's slot is not simply owned. The leader's
// expiry and eviction deletes skip such keys, one by one, rather than
// being refused whole: a frozen slot's keys must not change under the
// export (an expired one is left out of it), an importing slot's are the
// exporter's to expire, and an unowned slot's are waiting for a drop. The
// leader does not pick them (ExpiredKeys, EvictionCandidates), so they are
// not proposed again and again.
func (ks *keyspace) slotHeld(key []byte) bool {
	x := ks.slots
	return x != nil && x.busy > 0 && x.state[slot.Of(key)] != slotOwned
}

// slotRefused reports whether the command must be refused because a slot
// of one of its keys is not served here: unowned or importing, or frozen
// for a write. FLUSHALL and FLUSHDB are refused while a slot is frozen or
// importing. Commands without keys (DBSIZE, KEYS, SCAN, ...) run: they see
// the keys of every slot this replica holds, as Redis's do during a
// migration.
func (c *execCtx) slotRefused(def *cmdDef, args [][]byte) bool {
	x := c.ks.slots
	if x == nil || x.busy == 0 {
		return false
	}
	if def.name == "flushall" || def.name == "flushdb" {
		return x.moving > 0
	}
	if def.keys == nil {
		return false
	}
	for _, k := range def.keys(args) {
		switch x.state[slot.Of(k)] {
		case slotUnowned, slotImporting:
			return true
		case slotFrozen:
			if def.write {
				return true
			}
		}
	}
	return false
}

// txSlotRefused reports whether any command of a transaction would be
// refused: then EXEC applies none of them, as a cluster node refuses the
// whole transaction.
func (c *execCtx) txSlotRefused(tx *command.Tx) bool {
	if c.ks.slots == nil || c.ks.slots.busy == 0 {
		return false
	}
	for i := range tx.Ops {
		op := &tx.Ops[i]
		if op.Kind != command.OpCommand || len(op.Args) == 0 {
			continue
		}
		if def := c.f.lookupCmd(op.Args[0]); def != nil && arityOK(def.arity, len(op.Args)) && c.slotRefused(def, op.Args) {
			return true
		}
	}
	return false
}

// keysBySpec returns a function finding a command's keys from its spec;
// nil for a command without keys.
func keysBySpec(s *command.Spec) func([][]byte) [][]byte {
	if len(s.KeySpecs) == 0 {
		return nil
	}
	return func(args [][]byte) [][]byte {
		pos, _, ok := s.FindKeys(args)
		if !ok {
			return nil
		}
		out := make([][]byte, len(pos))
		for i, p := range pos {
			out[i] = args[p]
		}
		return out
	}
}

// sortKeys finds SORT's keys: the sorted key and the STORE destination,
// whose key spec is "unknown" (as in Redis), so keysBySpec would miss it.
// An argument that merely spells "store" (a BY pattern) makes the next one
// count as a key too: a needless refusal at worst, never a missed one.
func sortKeys(args [][]byte) [][]byte {
	keys := [][]byte{args[1]}
	for j := 2; j+1 < len(args); j++ {
		if eqFold(args[j], "store") {
			keys = append(keys, args[j+1])
		}
	}
	return keys
}

// --- slot entries ------------------------------------------------------------

// applySlot applies a TypeSlot entry: every slot of the range takes the
// step or none does (the reply says why), so a refused entry changes
// nothing. The reply is +OK, or for import and drop the number of keys
// stored or deleted.
func (c *execCtx) applySlot(op *command.SlotOp) {
	ks := c.ks
	want := map[command.SlotAction]func(st slotState, ep uint64, s int) (slotState, bool, string){
		command.SlotFreeze: func(st slotState, ep uint64, _ int) (slotState, bool, string) {
			switch {
			case st == slotFrozen && ep == op.Epoch:
				return slotFrozen, false, ""
			case st == slotOwned && ep <= op.Epoch:
				return slotFrozen, true, ""
			}
			return st, false, "cannot freeze"
		},
		command.SlotUnfreeze: func(st slotState, ep uint64, _ int) (slotState, bool, string) {
			switch {
			case st == slotOwned && ep <= op.Epoch:
				return slotOwned, false, ""
			case st == slotFrozen && ep <= op.Epoch:
				return slotOwned, true, ""
			}
			return st, false, "cannot unfreeze"
		},
		// An abort's unfreeze (format 3) also raises an owned slot's
		// epoch: the aborted move's driver may still be running on a
		// former metadata leader, and its freeze, of the move's older
		// epoch, must then be refused rather than freeze the range for
		// good. SlotUnfreeze keeps its rule for the logs that carry it.
		command.SlotAbort: func(st slotState, ep uint64, _ int) (slotState, bool, string) {
			switch {
			case st == slotOwned && ep == op.Epoch:
				return slotOwned, false, ""
			case (st == slotOwned || st == slotFrozen) && ep <= op.Epoch:
				return slotOwned, true, ""
			}
			return st, false, "cannot abort a move of"
		},
		command.SlotImport: func(st slotState, ep uint64, _ int) (slotState, bool, string) {
			switch {
			case st == slotImporting && ep == op.Epoch:
				return slotImporting, false, ""
			case (st == slotImporting || st == slotUnowned) && ep <= op.Epoch:
				return slotImporting, true, ""
			}
			return st, false, "cannot import into"
		},
		command.SlotOwn: func(st slotState, ep uint64, _ int) (slotState, bool, string) {
			switch {
			case st == slotOwned && ep <= op.Epoch:
				return slotOwned, false, ""
			case (st == slotImporting || st == slotUnowned) && ep <= op.Epoch:
				return slotOwned, true, ""
			}
			return st, false, "cannot own"
		},
		command.SlotDrop: func(st slotState, ep uint64, s int) (slotState, bool, string) {
			switch {
			case ep > op.Epoch:
			case st == slotOwned && ks.slotCount(s) > 0:
				return st, false, "holds keys and is owned: freeze it before dropping"
			default:
				return slotUnowned, true, ""
			}
			return st, false, "cannot drop"
		},
	}[op.Action]
	if want == nil {
		c.err("ERR unknown slot action " + strconv.Itoa(int(op.Action)))
		return
	}
	next := make([]slotState, 0, op.Last-op.First+1)
	changed := make([]bool, 0, cap(next))
	for s := op.First; s <= op.Last; s++ {
		st, ep := ks.slotState(s)
		n, ch, why := want(st, ep, s)
		if why != "" {
			c.err(fmt.Sprintf("ERR slot %d is %s at epoch %d: %s it at epoch %d", s, st, ep, why, op.Epoch))
			return
		}
		next, changed = append(next, n), append(changed, ch)
	}
	var recs []batchKey
	if op.Action == command.SlotImport {
		var err error
		if recs, err = decodeSlotBatch(op.Batch, ks.lim); err != nil {
			c.err("ERR slot import: " + err.Error())
			return
		}
		for _, r := range recs {
			if s := slot.Of(r.key); s < op.First || s > op.Last {
				c.err(fmt.Sprintf("ERR slot import: key %q is in slot %d, outside %d-%d", r.key, s, op.First, op.Last))
				return
			}
		}
	}
	// Keys of a slot entering a new import, or being dropped, go first: an
	// import of a new epoch must not keep an abandoned attempt's keys.
	dropped := 0
	if op.Action == command.SlotDrop || op.Action == command.SlotImport {
		for i, s := 0, op.First; s <= op.Last; i, s = i+1, s+1 {
			if op.Action == command.SlotImport && !changed[i] {
				continue
			}
			for _, pos := range ks.slotKeys(s, s) {
				c.deleteAt(pos)
				dropped++
			}
		}
	}
	for i, s := 0, op.First; s <= op.Last; i, s = i+1, s+1 {
		if changed[i] {
			ks.setSlot(s, next[i], op.Epoch)
		}
	}
	switch op.Action {
	case command.SlotDrop:
		c.int(int64(dropped))
	case command.SlotImport:
		c.int(int64(c.importKeys(recs)))
	default:
		c.ok()
	}
}

// importKeys stores the keys of a batch, replacing any present (a repeated
// chunk replaces, never duplicates), and returns how many it stored: a key
// whose deadline has passed at the entry's time is not stored.
func (c *execCtx) importKeys(recs []batchKey) int {
	n := 0
	for _, r := range recs {
		if pos := c.ks.find(r.key); pos >= 0 {
			c.deleteAt(pos)
		}
		if r.exp != noExpiry && r.exp <= c.now {
			continue
		}
		var pos int
		if r.rec.Kind == snapshot.KindSet {
			pos = c.ks.addSet(r.key, r.rec.Set, r.exp)
		} else {
			pos = c.ks.addString(r.key, r.rec.Value, r.exp)
		}
		c.touch(pos)
		n++
	}
	return n
}

// slotCount is the number of keys of slot s, logically expired ones
// included.
func (ks *keyspace) slotCount(s int) int {
	ks.ensureSlotIndex()
	return int(ks.slotIdx.count[s])
}

// --- the batch: a slot's keys as one import -----------------------------------

// A batch is the keys of an export, the body of an import entry:
//
//	batch := version:1 (=1) count:uvarint (len:uvarint key deadline:uvarint len:uvarint dump)*
//
// deadline is the absolute Unix ms plus one, 0 for none; dump is the key's
// DUMP payload (snapshot.Dump), which carries its own CRC64, so a damaged
// batch is refused whole at import, never half applied.

const batchVersion = 1

type batchKey struct {
	key []byte
	exp int64 // absolute Unix ms, or noExpiry
	rec *snapshot.Record
}

var errBatch = errors.New("malformed batch")

// appendBatchKey appends one key to a batch body (after its header).
func appendBatchKey(dst, key []byte, exp int64, dump []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(exp+1))
	dst = binary.AppendUvarint(dst, uint64(len(dump)))
	return append(dst, dump...)
}

func batchHeader(n int) []byte {
	return binary.AppendUvarint([]byte{batchVersion}, uint64(n))
}

// decodeSlotBatch decodes and checks a whole batch: every payload must
// undump, and no key may appear twice.
func decodeSlotBatch(b []byte, lim setenc.Limits) ([]batchKey, error) {
	if len(b) == 0 || b[0] != batchVersion {
		return nil, fmt.Errorf("%w: version", errBatch)
	}
	off := 1
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return 0, false
		}
		off += n
		return v, true
	}
	bytesField := func() ([]byte, bool) {
		l, ok := uv()
		if !ok || l > uint64(len(b)-off) {
			return nil, false
		}
		v := b[off : off+int(l) : off+int(l)]
		off += int(l)
		return v, true
	}
	n, ok := uv()
	// Each key takes at least 3 bytes plus a payload of 10: a count beyond
	// that is damage, and must not size an allocation.
	if !ok || n > uint64(len(b)-off)/13 {
		return nil, fmt.Errorf("%w: count", errBatch)
	}
	out := make([]batchKey, 0, n)
	seen := make(map[string]bool, n)
	for i := uint64(0); i < n; i++ {
		key, ok1 := bytesField()
		dl, ok2 := uv()
		dump, ok3 := bytesField()
		if !ok1 || !ok2 || !ok3 || dl > 1<<62 {
			return nil, fmt.Errorf("%w: key %d at offset %d", errBatch, i, off)
		}
		if seen[string(key)] {
			return nil, fmt.Errorf("%w: key %q twice", errBatch, key)
		}
		seen[string(key)] = true
		rec, err := snapshot.Undump(dump, lim)
		if err != nil {
			return nil, fmt.Errorf("%w: key %q: %w", errBatch, key, err)
		}
		out = append(out, batchKey{key: key, exp: int64(dl) - 1, rec: rec})
	}
	if off != len(b) {
		return nil, fmt.Errorf("%w: trailing bytes at offset %d", errBatch, off)
	}
	return out, nil
}

// --- the FSM's API ---------------------------------------------------------------

// EnableSlotIndex builds the per-slot key index now rather than at its
// first use (a cluster-enabled node, so that the first CLUSTER
// COUNTKEYSINSLOT does not hold Apply while every key is indexed).
func (f *FSM) EnableSlotIndex() {
	f.mu.Lock()
	f.ks.ensureSlotIndex()
	f.mu.Unlock()
}

// withSlotIndex runs fn under the read lock with the index built.
func (f *FSM) withSlotIndex(fn func(ks *keyspace)) {
	f.mu.RLock()
	if f.ks.slotIdx == nil {
		f.mu.RUnlock()
		f.EnableSlotIndex()
		f.mu.RLock()
	}
	defer f.mu.RUnlock()
	fn(f.ks)
}

// CountKeysInSlot is CLUSTER COUNTKEYSINSLOT: the keys of hash slot s,
// logically expired ones included, as Redis counts them. O(1).
func (f *FSM) CountKeysInSlot(s int) (n int) {
	f.withSlotIndex(func(ks *keyspace) { n = int(ks.slotIdx.count[s]) })
	return n
}

// GetKeysInSlot is CLUSTER GETKEYSINSLOT: copies of up to count keys of
// hash slot s, newest first as in Redis 7.0 (on a replica restored from a
// snapshot, in the snapshot's order). O(count).
func (f *FSM) GetKeysInSlot(s, count int) (keys [][]byte) {
	f.withSlotIndex(func(ks *keyspace) {
		for _, pos := range ks.slotIdx.positions(nil, s, count) {
			keys = append(keys, bytes.Clone(ks.keys.At(pos)))
		}
	})
	return keys
}

// SlotState reports the state of hash slot s as the applied log left it
// ("owned", "frozen", "importing" or "unowned") and the epoch of the last
// migration step applied to it.
func (f *FSM) SlotState(s int) (state string, epoch uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st, ep := f.ks.slotState(s)
	return st.String(), ep
}

// ErrSlotNotFrozen is returned by ExportSlot for a slot that is not
// frozen: its keys could still change under the copy.
var ErrSlotNotFrozen = errors.New("fsm: slot is not frozen")

// ExportSlot returns the keys of frozen hash slot s, in key order after
// the key after (nil: from the first), as the batch of a SlotImport entry:
// whole keys up to about maxBytes (at least one key). last is the last key
// in the batch, to pass as after for the next one; done says no key
// follows it. Keys whose deadline has passed are left out. Every replica
// exports the same batches from the same frozen slot, so a new leader can
// resume an export where the old one stopped.
func (f *FSM) ExportSlot(s int, after []byte, maxBytes int) (batch, last []byte, done bool, err error) {
	if s < 0 || s >= slot.Count {
		return nil, nil, false, fmt.Errorf("fsm: export: slot %d out of range", s)
	}
	f.withSlotIndex(func(ks *keyspace) {
		if st, _ := ks.slotState(s); st != slotFrozen {
			err = fmt.Errorf("%w: slot %d is %s", ErrSlotNotFrozen, s, st)
			return
		}
		pos := ks.slotIdx.positions(nil, s, -1)
		slices.SortFunc(pos, func(a, b int) int { return bytes.Compare(ks.keys.At(a), ks.keys.At(b)) })
		var body []byte
		n := 0
		done = true
		for _, p := range pos {
			key := ks.keys.At(p)
			if after != nil && bytes.Compare(key, after) <= 0 {
				continue
			}
			if n > 0 && len(body) >= maxBytes {
				done = false
				break
			}
			exp := ks.exp(p)
			if exp != noExpiry && exp <= ks.now {
				continue
			}
			var dump []byte
			if ks.isSet(p) {
				dump = snapshot.Dump(nil, ks.set(p))
			} else {
				dump = snapshot.Dump(ks.str(p), nil)
			}
			body = appendBatchKey(body, key, exp, dump)
			last = bytes.Clone(key)
			n++
		}
		batch = append(batchHeader(n), body...)
	})
	return batch, last, done, err
}

// --- snapshots -------------------------------------------------------------------

// AuxSlots is the snapshot AUX field holding the slots that are not owned
// at epoch 0: "first-last:state:epoch" runs, comma-separated, in slot
// order. Written only once a slot entry was applied (Redis ignores AUX
// fields it does not know, so the file still loads in redis-server).
const AuxSlots = "raftset-slots"

// formatSlots encodes x as the AuxSlots value.
func formatSlots(x *slotStates) string {
	var b strings.Builder
	for s := 0; s < slot.Count; {
		st, ep := x.state[s], x.epoch[s]
		e := s
		for e+1 < slot.Count && x.state[e+1] == st && x.epoch[e+1] == ep {
			e++
		}
		if st != slotOwned || ep != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d-%d:%s:%d", s, e, st, ep)
		}
		s = e + 1
	}
	return b.String()
}

// parseSlots decodes an AuxSlots value.
func parseSlots(v string) (*slotStates, error) {
	x := &slotStates{}
	ks := &keyspace{slots: x}
	next := 0
	if v == "" {
		return x, nil
	}
	for _, run := range strings.Split(v, ",") {
		parts := strings.Split(run, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("slot run %q", run)
		}
		fs, ls, ok := strings.Cut(parts[0], "-")
		first, err1 := strconv.Atoi(fs)
		last, err2 := strconv.Atoi(ls)
		ep, err3 := strconv.ParseUint(parts[2], 10, 64)
		st := slices.Index(slotStateNames[:], parts[1])
		if !ok || errors.Join(err1, err2, err3) != nil || st < 0 || first < next || last < first || last >= slot.Count {
			return nil, fmt.Errorf("slot run %q", run)
		}
		for s := first; s <= last; s++ {
			ks.setSlot(s, slotState(st), ep)
		}
		next = last + 1
	}
	return x, nil
}
