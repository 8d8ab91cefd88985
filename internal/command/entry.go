package command

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the highest log-entry format version this binary reads. A
// change that an older binary would misread bumps it; a new entry type that
// older binaries may safely skip does not (it sets IgnoreIfUnknown instead).
// Each entry is written in the lowest version that can carry it
// (Entry.Version), so batches and node addresses stay readable by
// binaries of version 1, slot entries need every voter to read version 2,
// and only an abort's SlotAbort needs version 3.
const Version = 3

// Version reports the format version an entry of type t is written in: 2
// for TypeSlot, which a version-1 binary cannot skip (it would keep keys
// another shard owns), 1 for every other type. A SlotAbort entry is the
// exception (Entry.Version).
func (t EntryType) Version() byte {
	if t == TypeSlot {
		return SlotVersion
	}
	return 1
}

// SlotVersion is the format version of TypeSlot entries.
const SlotVersion = 2

// SlotAbortVersion is the format version of a TypeSlot entry whose action
// is SlotAbort: a version-2 binary does not know the action, and must stop
// at it with the "newer raftset" error rather than call it corrupt.
const SlotAbortVersion = 3

// Version reports the format version the entry is written in: its type's
// (EntryType.Version), or SlotAbortVersion for a SlotAbort.
func (e *Entry) Version() byte {
	if e.Type == TypeSlot && e.Slot != nil && e.Slot.Action == SlotAbort {
		return SlotAbortVersion
	}
	return e.Type.Version()
}

// EntryType is the second byte of a log entry.
type EntryType byte

const (
	// TypeBatch carries client writes (and leader-proposed expiry deletes).
	TypeBatch EntryType = 1
	// TypeNode publishes a node's client address (Entry.Node). It is
	// ignorable: a binary that predates it skips it and only lacks the
	// address, which is not part of the data.
	TypeNode = IgnoreIfUnknown | 2
	// TypeSlot changes the state of a range of hash slots (Entry.Slot):
	// the migration steps of docs/sharding.md. Not ignorable, and written
	// in format version 2 (SlotVersion).
	TypeSlot EntryType = 3
	// IgnoreIfUnknown marks a type that an older binary may skip. A binary
	// that meets an unknown type without it cannot apply the entry.
	IgnoreIfUnknown EntryType = 0x80
)

// OpKind says what one element of a batch is.
type OpKind byte

const (
	// OpCommand is one command: Args, name first.
	OpCommand OpKind = 0
	// OpTx is a MULTI/EXEC transaction: Tx.
	OpTx OpKind = 1
	// OpReply is a reply decided before proposing, replayed verbatim: an
	// error found without state (a syntax error inside a transaction), or
	// the reply of a connection or node command queued in a transaction and
	// answered at EXEC (+OK for UNWATCH).
	OpReply OpKind = 2
)

// Op is one element of a batch.
type Op struct {
	Kind  OpKind
	Args  [][]byte
	Tx    *Tx
	Reply []byte // OpReply: RESP2 wire bytes
}

// Tx is a transaction: its watched keys, and its commands, applied as one.
type Tx struct {
	Watches []Watch
	Ops     []Op // OpCommand or OpReply only
}

// Watch is a key watched by WATCH and what the state machine said about it
// then; EXEC aborts unless the key's stamp is unchanged.
type Watch struct {
	Key    []byte
	Exists bool
	Stamp  uint64
}

// Entry is a decoded log entry: a TypeBatch entry has NowMs and Ops, a
// TypeNode entry Node, a TypeSlot entry NowMs and Slot.
type Entry struct {
	Type  EntryType
	NowMs int64 // the proposing leader's clock, Unix ms
	Ops   []Op
	Node  *NodeAddr
	Slot  *SlotOp
}

// SlotAction is what a TypeSlot entry does to its slots (docs/sharding.md,
// Moving a slot; the state machine's rules are in fsm/slots.go).
type SlotAction byte

const (
	// SlotFreeze: an owned slot stops taking writes (migrating out).
	SlotFreeze SlotAction = 1
	// SlotUnfreeze: a frozen slot is owned again (the migration aborted).
	SlotUnfreeze SlotAction = 2
	// SlotImport: keys of a slot this shard does not own are stored
	// (SlotOp.Batch), refused to clients until SlotOwn.
	SlotImport SlotAction = 3
	// SlotOwn: an importing (or unowned) slot becomes owned.
	SlotOwn SlotAction = 4
	// SlotDrop: a slot's keys are deleted and the slot is no longer owned.
	SlotDrop SlotAction = 5
	// SlotAbort: an aborted move's range is owned again in its source
	// shard (a frozen slot unfrozen, an owned one kept) and takes the
	// abort's epoch either way, so that a step of the aborted move that
	// arrives later (a stale driver's freeze) is refused. Written in
	// format version 3 (SlotAbortVersion); SlotUnfreeze, which leaves an
	// owned slot's epoch as it is, remains for logs written before it.
	SlotAbort SlotAction = 6
)

// MaxSlotAction is the highest SlotAction this binary knows.
const MaxSlotAction = SlotAbort

// SlotOp is the body of a TypeSlot entry: an action on the hash slots
// First..Last (inclusive), keyed by the migration's epoch so that a
// repeated step is recognised. Batch is SlotImport's keys (fsm's export
// format), nil for the other actions.
type SlotOp struct {
	Action      SlotAction
	First, Last int
	Epoch       uint64
	Batch       []byte
}

// slotCount is the number of hash slots (internal/slot.Count; not imported,
// this package imports the standard library only).
const slotCount = 16384

// NodeAddr is a node's client address as the log carries it.
type NodeAddr struct {
	ID   string
	Addr string
}

// LegacyNodeCommand is how node addresses travelled before TypeNode: as the
// command op "raftset.node <id> <addr>" inside a batch, which the state
// machine answered as an unknown command. Logs and snapshots written then
// still hold such ops, so the state machine must keep reading them.
const LegacyNodeCommand = "raftset.node"

// LegacyNode reports whether op is a LegacyNodeCommand op, and its address.
func (op *Op) LegacyNode() (NodeAddr, bool) {
	if op.Kind != OpCommand || len(op.Args) != 3 || string(op.Args[0]) != LegacyNodeCommand {
		return NodeAddr{}, false
	}
	return NodeAddr{ID: string(op.Args[1]), Addr: string(op.Args[2])}, true
}

// ErrDecode is wrapped by every decoding error (a *DecodeError).
var ErrDecode = errors.New("command: malformed log entry")

// DecodeError says why an entry does not decode, telling an entry written
// by a newer raftset (which an upgrade of this binary can apply) from a
// corrupt one (which no binary can).
type DecodeError struct {
	Version byte // the entry's format version: its first byte, 0 if it has none
	// Newer is set when Version is above the highest this binary reads.
	Newer bool
	// Reason says what is wrong with an entry of a known version.
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Newer {
		return fmt.Sprintf("entry written by a newer raftset (format version %d, this binary reads up to %d)", e.Version, Version)
	}
	return fmt.Sprintf("corrupt entry (format version %d): %s", e.Version, e.Reason)
}

// Unwrap makes every DecodeError an ErrDecode.
func (e *DecodeError) Unwrap() error { return ErrDecode }

// Cmd returns an OpCommand op for the arguments.
func Cmd(args ...[]byte) Op { return Op{Kind: OpCommand, Args: args} }

// Encode appends the entry's encoding to dst: the version and type bytes,
// then for TypeBatch the clock and the ops, for TypeNode the id and the
// address.
func (e *Entry) Encode(dst []byte) []byte {
	dst = append(dst, e.Version(), byte(e.Type))
	switch e.Type {
	case TypeNode:
		dst = appendBytes(dst, []byte(e.Node.ID))
		return appendBytes(dst, []byte(e.Node.Addr))
	case TypeSlot:
		dst = binary.AppendUvarint(dst, uint64(e.NowMs))
		dst = append(dst, byte(e.Slot.Action))
		dst = binary.AppendUvarint(dst, uint64(e.Slot.First))
		dst = binary.AppendUvarint(dst, uint64(e.Slot.Last))
		dst = binary.AppendUvarint(dst, e.Slot.Epoch)
		return appendBytes(dst, e.Slot.Batch)
	}
	dst = binary.AppendUvarint(dst, uint64(e.NowMs))
	return appendOps(dst, e.Ops)
}

func appendOps(dst []byte, ops []Op) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for i := range ops {
		op := &ops[i]
		dst = append(dst, byte(op.Kind))
		switch op.Kind {
		case OpCommand:
			dst = AppendArgs(dst, op.Args)
		case OpTx:
			dst = binary.AppendUvarint(dst, uint64(len(op.Tx.Watches)))
			for _, w := range op.Tx.Watches {
				dst = appendBytes(dst, w.Key)
				if w.Exists {
					dst = append(dst, 1)
				} else {
					dst = append(dst, 0)
				}
				dst = binary.AppendUvarint(dst, w.Stamp)
			}
			dst = appendOps(dst, op.Tx.Ops)
		case OpReply:
			dst = appendBytes(dst, op.Reply)
		}
	}
	return dst
}

// AppendArgs appends an argument vector as argc followed by each argument.
func AppendArgs(dst []byte, args [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(args)))
	for _, a := range args {
		dst = appendBytes(dst, a)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Decode parses a log entry. Arguments alias b. An entry of an unknown type
// with the IgnoreIfUnknown bit decodes to an Entry with no ops. Errors are
// *DecodeError.
func Decode(b []byte) (*Entry, error) {
	return decode(b, nil)
}

func decode(b []byte, ar *Decoder) (*Entry, error) {
	d := decoder{b: b, ar: ar}
	if len(b) > 0 {
		d.version = b[0]
	}
	switch {
	case len(b) > 0 && b[0] > Version:
		return nil, &DecodeError{Version: b[0], Newer: true}
	case len(b) < 2:
		d.fail(fmt.Sprintf("entry of %d bytes", len(b)))
		return nil, d.err
	case b[0] == 0:
		d.fail("unknown format version")
		return nil, d.err
	}
	e := &Entry{Type: EntryType(b[1])}
	d.off = 2
	switch e.Type {
	case TypeBatch:
		now := d.uvarint()
		if now > 1<<62 {
			d.fail("clock")
		}
		e.NowMs = int64(now)
		e.Ops = d.ops(0)
	case TypeNode:
		id, addr := d.bytes(), d.bytes()
		e.Node = &NodeAddr{ID: string(id), Addr: string(addr)}
	case TypeSlot:
		if b[0] < SlotVersion {
			// A version-1 binary never wrote this type.
			d.fail("slot entry in format version 1")
			return nil, d.err
		}
		e.NowMs = int64(d.uvarint())
		if e.NowMs > 1<<62 {
			d.fail("clock")
		}
		e.Slot = d.slotOp()
	default:
		if e.Type&IgnoreIfUnknown != 0 {
			return e, nil
		}
		// Without the bit, only a newer binary could have meant it; but
		// such a binary must also have raised the version, so this one is
		// damaged.
		d.fail(fmt.Sprintf("unknown entry type %d", e.Type))
		return nil, d.err
	}
	if d.err == nil && d.off != len(b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return e, nil
}

type decoder struct {
	b       []byte
	off     int
	version byte
	err     error
	ar      *Decoder // nil: every slice is allocated
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = &DecodeError{Version: d.version, Reason: fmt.Sprintf("%s at offset %d", what, d.off)}
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.off += n
	return v
}

// count reads a length that must be backed by at least min bytes per item,
// so a corrupt count cannot make us allocate more than the entry's size.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)-d.off)/uint64(min) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("length")
		return nil
	}
	s := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) slotOp() *SlotOp {
	if d.err != nil || d.off >= len(d.b) {
		d.fail("slot action")
		return nil
	}
	op := &SlotOp{Action: SlotAction(d.b[d.off])}
	d.off++
	if op.Action == 0 || op.Action > MaxSlotAction {
		d.fail("slot action")
	}
	first, last := d.uvarint(), d.uvarint()
	if d.err == nil && (first > last || last >= slotCount) {
		d.fail("slot range")
	}
	op.First, op.Last = int(first), int(last)
	op.Epoch = d.uvarint()
	if op.Batch = d.bytes(); len(op.Batch) == 0 {
		op.Batch = nil // as encoded from a nil batch
	}
	if d.err == nil && op.Action != SlotImport && len(op.Batch) > 0 {
		d.fail("slot batch")
	}
	if d.err == nil && op.Action == SlotAbort && d.version < SlotAbortVersion {
		// No binary wrote this action below its version.
		d.fail(fmt.Sprintf("slot abort in format version %d", d.version))
	}
	return op
}

func (d *decoder) ops(depth int) []Op {
	n := d.count(2)
	if d.err != nil {
		return nil
	}
	ops := d.ar.opSlice(n)
	for i := 0; i < n && d.err == nil; i++ {
		if d.off >= len(d.b) {
			d.fail("op kind")
			break
		}
		kind := OpKind(d.b[d.off])
		d.off++
		op := Op{Kind: kind}
		switch kind {
		case OpCommand:
			op.Args = d.args()
		case OpTx:
			if depth > 0 {
				d.fail("nested transaction")
				break
			}
			tx := &Tx{}
			nw := d.count(3)
			for j := 0; j < nw && d.err == nil; j++ {
				w := Watch{Key: d.bytes()}
				if d.err == nil {
					if d.off >= len(d.b) || d.b[d.off] > 1 {
						d.fail("watch flag")
						break
					}
					w.Exists = d.b[d.off] == 1
					d.off++
				}
				w.Stamp = d.uvarint()
				tx.Watches = append(tx.Watches, w)
			}
			tx.Ops = d.ops(depth + 1)
			op.Tx = tx
		case OpReply:
			op.Reply = d.bytes()
		default:
			d.fail("op kind")
		}
		ops = append(ops, op)
	}
	return ops
}

func (d *decoder) args() [][]byte {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	if n == 0 {
		d.fail("empty command")
		return nil
	}
	args := d.ar.argSlice(n)
	for i := range args {
		args[i] = d.bytes()
	}
	return args
}
