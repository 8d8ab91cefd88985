package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
	"raftset/internal/slot"
)

// Moving slots online (docs/sharding.md, Moving a slot): RAFT.SHARD
// MOVESLOTS runs on the metadata leader's process, which drives every
// step through the logs that own it. The plan lives in the map (ShardMap.Moves)
// with the epochs the steps carry, so a driver that stopped half way (its
// process died, a step failed) leaves a map from which running the same
// command again completes the move: every step is idempotent for its epoch.

const (
	// cmdMoveSlots is RAFT.SHARD MOVESLOTS relayed to the metadata leader's
	// process: raftset.shard <MetaGroup> raftset.moveslots first last to
	// [relayed].
	cmdMoveSlots = "raftset.moveslots"
	// cmdSlotStep is one slot migration step for a shard's leader
	// (raftset.slotstep <TypeSlot entry>), relayed by its followers.
	cmdSlotStep = "raftset.slotstep"
	// cmdExportSlot is raftset.exportslot <slot> first|after <key> <max>:
	// a batch of a frozen slot's keys from any replica, after a barrier.
	cmdExportSlot = "raftset.exportslot"

	moveCallTimeout = 2 * time.Minute
	// stepRetry bounds how long one step is retried while its shard has no
	// leader or holds slot steps back (TRYAGAIN, CLUSTERDOWN).
	stepRetry = 30 * time.Second
	// exportBytes is the size of an import batch.
	exportBytes = 256 << 10
	// passOverCall bounds a call to another member of a shard after the
	// replica here, or a member before it, answered -TRYAGAIN (shardCall).
	passOverCall = 5 * time.Second
	// copyWorkers is how many slots a move copies at once.
	copyWorkers = 16
	// mapStepTries bounds how often a move's map step is tried again after
	// another change won the compare-and-set: each try follows a change
	// that did win, so running out means a stream of changes.
	mapStepTries = 20
)

var relayedArg = []byte("relayed")

// moveSlots runs RAFT.SHARD MOVESLOTS here when this process's metadata
// voter leads, else on the metadata leader's process (one hop from a voter,
// two from a process outside the group).
func (h *Host) moveSlots(ctx context.Context, first, last int, to uint32, relayed bool) []byte {
	args := [][]byte{[]byte(cmdMoveSlots), []byte(strconv.Itoa(first)), []byte(strconv.Itoa(last)),
		[]byte(strconv.FormatUint(uint64(to), 10))}
	return h.relayToMeta(ctx, "MOVESLOTS", runAgain, args, relayed, func() []byte { return h.driveMove(ctx, first, last, to) })
}

// driveMove moves slots first..last to shard to, or completes the move of
// exactly that range that the map shows in progress. Moves of other ranges
// run at the same time; a second driver of this range waits for the first.
func (h *Host) driveMove(ctx context.Context, first, last int, to uint32) []byte {
	h.moveMu.RLock()
	defer h.moveMu.RUnlock()
	err := h.lockRange(ctx, first, last)
	if err == nil {
		defer h.unlockRange(first, last)
		err = h.move(ctx, first, last, to)
	}
	if err != nil {
		if errors.Is(err, errMoveSuperseded) {
			// Nothing to resume: running the command again would start a
			// new move.
			return command.Error("ERR MOVESLOTS " + strconv.Itoa(first) + "-" + strconv.Itoa(last) + " to shard " +
				strconv.FormatUint(uint64(to), 10) + ": " + err.Error())
		}
		return command.Error("ERR MOVESLOTS " + strconv.Itoa(first) + "-" + strconv.Itoa(last) + " to shard " +
			strconv.FormatUint(uint64(to), 10) + ": " + err.Error() + " (run it again to resume)")
	}
	return command.OK
}

// lockRange waits until no move or abort of first..last runs here, then
// claims the range until unlockRange.
func (h *Host) lockRange(ctx context.Context, first, last int) error {
	k := [2]int{first, last}
	for {
		h.drivingMu.Lock()
		busy, ok := h.driving[k]
		if !ok {
			if h.driving == nil {
				h.driving = map[[2]int]chan struct{}{}
			}
			h.driving[k] = make(chan struct{})
			h.drivingMu.Unlock()
			return nil
		}
		h.drivingMu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the driver of slots %d-%d running here: %w", first, last, ctx.Err())
		}
	}
}

func (h *Host) unlockRange(first, last int) {
	h.drivingMu.Lock()
	defer h.drivingMu.Unlock()
	k := [2]int{first, last}
	close(h.driving[k])
	delete(h.driving, k)
}

// mapStep changes the map for a step of a move: change reads the current
// map and returns the next one (nil: nothing to change), and a
// compare-and-set that another change won (a move driven elsewhere, a
// driver of a former metadata leader) is tried again from the map that
// won, since each step only changes its own move. It returns the map the
// step left; change's error as it is, a failed compare-and-set's after
// what.
func (h *Host) mapStep(ctx context.Context, what string, change func(cur *ShardMap) (*ShardMap, error)) (*ShardMap, error) {
	h.mapStepMu.Lock()
	defer h.mapStepMu.Unlock()
	var err error
	for range mapStepTries {
		var cur, next *ShardMap
		if cur, err = h.readMetaSettled(ctx); err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, errors.New("the cluster map is not bootstrapped yet")
		}
		if next, err = change(cur); err != nil || next == nil {
			return cur, err
		}
		if f := h.beforeMapCAS.Load(); f != nil {
			(*f)(what)
		}
		if err = h.metaCAS(ctx, cur, next); err == nil {
			return next, nil
		} else if !errors.Is(err, errMapChanged) {
			break
		}
	}
	return nil, fmt.Errorf("%s: %w", what, err)
}

func (h *Host) move(ctx context.Context, first, last int, to uint32) error {
	var mv SlotMove
	stable, fresh := false, false
	_, err := h.mapStep(ctx, "plan", func(cur *ShardMap) (*ShardMap, error) {
		if _, ok := cur.Shard(to); !ok {
			return nil, fmt.Errorf("no shard %d in the map", to)
		}
		if o, ok := cur.overlapping(first, last); ok {
			abort := "RAFT.SHARD ABORT"
			if len(cur.Moves) > 1 {
				abort += fmt.Sprintf(" %d %d", o.First, o.Last)
			}
			if o.Abort != 0 {
				return nil, fmt.Errorf("the move of slots %d-%d from shard %d to %d is being aborted: run %s to finish that first", o.First, o.Last, o.From, o.To, abort)
			}
			if o.First != first || o.Last != last || o.To != to {
				return nil, fmt.Errorf("slots %d-%d are moving from shard %d to %d: complete that move first", o.First, o.Last, o.From, o.To)
			}
			mv, fresh = o, false // resume it
			return nil, nil
		}
		from := cur.ShardOf(first)
		for s := first; s <= last; s++ {
			if cur.ShardOf(s) != from {
				return nil, fmt.Errorf("slots %d and %d are in different shards: move one shard's range at a time", first, s)
			}
		}
		if from == to {
			stable = true
			return nil, nil
		}
		// Plan: nothing changes for clients yet.
		next := cur.clone()
		next.Epoch++
		mv = SlotMove{First: first, Last: last, From: from, To: to, Epoch: next.Epoch}
		next.addMove(mv)
		fresh = true
		return next, nil
	})
	if err != nil {
		return err
	}
	if stable {
		return nil
	}
	if fresh {
		h.log.Info("moving slots", "first", first, "last", last, "from", mv.From, "to", to, "epoch", mv.Epoch)
	}
	if mv.Flip == 0 {
		e := mv.Epoch
		// The target owns every slot from its start (epoch 0) with no key
		// in it: it gives the range up before importing it.
		if _, err := h.slotStep(ctx, mv.To, command.SlotOp{Action: command.SlotDrop, First: first, Last: last, Epoch: e}); err != nil {
			return fmt.Errorf("drop in shard %d before the import: %w", mv.To, h.aborted(ctx, mv, err))
		}
		if err := h.fault("freeze", mv); err != nil {
			return err
		}
		if _, err := h.slotStep(ctx, mv.From, command.SlotOp{Action: command.SlotFreeze, First: first, Last: last, Epoch: e}); err != nil {
			return fmt.Errorf("freeze in shard %d: %w", mv.From, h.aborted(ctx, mv, err))
		}
		if err := h.fault("copy", mv); err != nil {
			return err
		}
		if err := h.copySlots(ctx, mv.From, mv.To, first, last, e); err != nil {
			return h.aborted(ctx, mv, err)
		}
		if err := h.fault("flip", mv); err != nil {
			return err
		}
		// Flip: from this map on, the slots are To's.
		_, err := h.mapStep(ctx, "flip", func(cur *ShardMap) (*ShardMap, error) {
			p := cur.sameMove(mv)
			if p == nil || p.Abort != 0 {
				return nil, h.superseded(cur, mv, errors.New("the flip found it gone"))
			}
			if p.Flip != 0 {
				mv = *p // another driver flipped it
				return nil, nil
			}
			next := cur.withOwner(first, last, mv.To)
			next.Epoch++
			p = next.sameMove(mv)
			p.Flip = next.Epoch
			mv = *p
			return next, nil
		})
		if err != nil {
			return err
		}
	}
	if _, err := h.slotStep(ctx, mv.To, command.SlotOp{Action: command.SlotOwn, First: first, Last: last, Epoch: mv.Flip}); err != nil {
		return fmt.Errorf("own in shard %d: %w", mv.To, err)
	}
	if err := h.fault("drop", mv); err != nil {
		return err
	}
	if _, err := h.slotStep(ctx, mv.From, command.SlotOp{Action: command.SlotDrop, First: first, Last: last, Epoch: mv.Flip}); err != nil {
		return fmt.Errorf("drop in shard %d: %w", mv.From, err)
	}
	done, err := h.mapStep(ctx, "stable", func(cur *ShardMap) (*ShardMap, error) {
		if cur.sameMove(mv) == nil {
			return nil, nil // another driver completed it
		}
		next := cur.clone()
		next.Epoch++
		next.dropMove(first, last)
		return next, nil
	})
	if err != nil {
		return err
	}
	h.log.Info("moved slots", "first", first, "last", last, "from", mv.From, "to", mv.To, "epoch", done.Epoch)
	return nil
}

// errMoveSuperseded: the map no longer shows the move this driver runs.
var errMoveSuperseded = errors.New("the move is no longer in the map")

// supersededError is errMoveSuperseded with what became of the move.
type supersededError struct{ msg string }

func (e *supersededError) Error() string        { return e.msg }
func (e *supersededError) Is(target error) bool { return target == errMoveSuperseded }

// aborted returns the error of a step of move mv that failed, saying so
// when the map shows mv no longer: a driver on a former metadata leader
// (a leadership change during the move) whose move RAFT.SHARD ABORT undid
// through the new leader, and whose step the abort's outranked (shard A
// refuses a freeze older than the abort's SlotAbort, shard B an import or
// drop older than its drop); or whose move another driver completed. That
// driver must stop; it has nothing to resume.
func (h *Host) aborted(ctx context.Context, mv SlotMove, err error) error {
	cur, rerr := h.readMetaSettled(ctx)
	if rerr != nil || cur == nil {
		return err
	}
	if m := cur.sameMove(mv); m != nil && m.Abort == 0 {
		return err // still this move: a failure to retry
	}
	return h.superseded(cur, mv, err)
}

// superseded is the error of a driver of move mv that map cur no longer
// shows (or shows aborting), the refused step's err with it.
func (h *Host) superseded(cur *ShardMap, mv SlotMove, err error) error {
	what := "aborted"
	if cur.ShardOf(mv.First) == mv.To {
		what = "completed by another driver"
	}
	return &supersededError{fmt.Sprintf("the move of epoch %d was %s (map epoch %d), and the step was refused: %v; this driver stopped",
		mv.Epoch, what, cur.Epoch, err)}
}

// copySlots copies slots first..last, copyWorkers at a time: each slot is
// a barrier and an entry in each shard, and concurrent ones share their
// fsyncs (group commit) and read barriers.
func (h *Host) copySlots(ctx context.Context, from, to uint32, first, last int, e uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, copyWorkers)
	var wg sync.WaitGroup
	for range copyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range next {
				if err := h.copySlot(ctx, from, to, s, e); err != nil {
					errs <- fmt.Errorf("copy of slot %d: %w", s, err)
					cancel()
					return
				}
			}
		}()
	}
feed:
	for s := first; s <= last; s++ {
		select {
		case next <- s:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// copySlot exports slot s from a replica of shard from, batch by batch,
// and imports each into shard to at epoch e. A repeated batch replaces
// what it carried, so a copy repeated after a failure never duplicates.
func (h *Host) copySlot(ctx context.Context, from, to uint32, s int, e uint64) error {
	mode, after := "first", []byte{}
	for {
		r, err := h.retry(ctx, func() []byte {
			return h.shardCall(ctx, from, [][]byte{[]byte(cmdExportSlot), []byte(strconv.Itoa(s)), []byte(mode), after,
				[]byte(strconv.Itoa(exportBytes))})
		})
		if err != nil {
			return fmt.Errorf("export from shard %d: %w", from, err)
		}
		parts, perr := respwire.SplitArray(r)
		if perr != nil || len(parts) != 3 {
			return fmt.Errorf("export from shard %d: unexpected reply %q", from, r)
		}
		batch, err1 := respwire.Parse(parts[0])
		lastKey, err2 := respwire.Parse(parts[1])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("export from shard %d: unexpected reply %q", from, r)
		}
		done := string(parts[2]) == ":1\r\n"
		if done && mode == "first" && emptyBatch(batch.Str) {
			// Nothing to import: the target owns the slot from unowned.
			// Most slots of a range are empty on a small dataset, and an
			// entry per slot is what a move costs most.
			return nil
		}
		if _, err := h.slotStep(ctx, to, command.SlotOp{Action: command.SlotImport, First: s, Last: s, Epoch: e, Batch: []byte(batch.Str)}); err != nil {
			return fmt.Errorf("import into shard %d: %w", to, err)
		}
		if done {
			return nil
		}
		mode, after = "after", []byte(lastKey.Str)
	}
}

// slotStep proposes op in shard id's log, through its leader, retrying
// while the shard cannot take it yet.
func (h *Host) slotStep(ctx context.Context, id uint32, op command.SlotOp) ([]byte, error) {
	ent := command.Entry{Type: command.TypeSlot, Slot: &op}
	args := [][]byte{[]byte(cmdSlotStep), ent.Encode(nil)}
	return h.retry(ctx, func() []byte { return h.shardCall(ctx, id, args) })
}

// retry calls f until its reply is neither TRYAGAIN nor CLUSTERDOWN (the
// steps are idempotent, so an unknown outcome is simply repeated), for at
// most stepRetry; an error reply is the error.
func (h *Host) retry(ctx context.Context, f func() []byte) ([]byte, error) {
	var r []byte
	err := h.poll(ctx, stepRetry, 100*time.Millisecond, func() bool {
		r = f()
		return !strings.HasPrefix(string(r), "-TRYAGAIN") && !strings.HasPrefix(string(r), "-CLUSTERDOWN")
	})
	if err != nil && !errors.Is(err, errPollLimit) {
		return nil, err
	}
	if command.IsError(r) {
		return nil, errors.New(strings.TrimSpace(string(r[1:])))
	}
	return r, nil
}

// shardCall runs an internal call on shard id: on the replica here, else
// on the first member process that runs it. A replica that answers
// -TRYAGAIN (it knows no leader) may be one the group removed while the
// map still names it (REMOVEREPLICA of this node whose reply was lost
// with its leader, then retried): it never learns a leader again, so the
// other members are asked then, each for at most passOverCall (one that
// does not answer must not hold the step longer than its retry would
// wait), and a process answering -TRYAGAIN for its replica is passed over
// the same way. Asked alone, such a replica held the driver on -TRYAGAIN
// until stepRetry ran out.
func (h *Host) shardCall(ctx context.Context, id uint32, args [][]byte) []byte {
	var tryAgain []byte
	if n, ok := h.held.Load().nodes[id]; ok {
		r := n.Internal(ctx, args)
		if !bytes.HasPrefix(r, []byte("-TRYAGAIN")) {
			return r
		}
		tryAgain = r
	}
	sh, ok := h.Map().Shard(id)
	if !ok {
		if tryAgain != nil {
			return tryAgain
		}
		return command.Error("ERR no shard " + strconv.FormatUint(uint64(id), 10))
	}
	sent := args
	if id == 0 {
		// callShard sends shard 0's calls bare, as a single group's node
		// takes them; a process's front end takes the drivers' calls
		// (slot steps, member changes) inside raftset.shard only.
		sent = append([][]byte{[]byte(cmdShard), []byte("0")}, args...)
	}
	for _, mem := range sh.Members {
		addr := h.clientAddr(mem)
		if addr == "" || mem == h.self {
			continue
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if tryAgain != nil {
			cctx, cancel = context.WithTimeout(ctx, passOverCall)
		}
		o := h.call(cctx, &h.movePool, addr, id, sent)
		cancel()
		switch {
		case o.kind == refused && bytes.HasPrefix(o.reply, []byte("-TRYAGAIN")):
			tryAgain = o.reply // not run there: another member may run it
		case o.kind == applied, o.kind == refused:
			return o.reply
		}
	}
	if tryAgain != nil {
		return tryAgain
	}
	return command.Error("TRYAGAIN no member of shard " + strconv.FormatUint(uint64(id), 10) + " answered")
}

// serveSlotStep is raftset.slotstep: proposed here when this node leads,
// else relayed to the leader.
func (n *Node) serveSlotStep(ctx context.Context, args [][]byte) []byte {
	op, bad := parseSlotStep(args, n.readFormat())
	if bad != nil {
		return bad
	}
	return n.ProposeSlot(ctx, op)
}

// parseSlotStep decodes a step. An entry of a format above read is
// refused as a release that reads only up to read refuses it (its decoder
// fails): giveBack relies on that reply.
func parseSlotStep(args [][]byte, read int) (command.SlotOp, []byte) {
	if len(args) != 2 {
		return command.SlotOp{}, command.Error(command.ErrArity(cmdSlotStep))
	}
	e, err := command.Decode(args[1])
	if err != nil || e.Type != command.TypeSlot || e.Slot == nil || int(e.Version()) > read {
		return command.SlotOp{}, command.Error("ERR " + notASlotStep)
	}
	return *e.Slot, nil
}

// slotExporter is the part of *fsm.FSM that exports a frozen slot.
type slotExporter interface {
	ExportSlot(s int, after []byte, maxBytes int) (batch, last []byte, done bool, err error)
}

// serveExportSlot is raftset.exportslot: after a linearizable barrier (the
// freeze that precedes the call is applied here), a batch of the slot's
// keys, the last key in it, and whether it was the last batch.
func (n *Node) serveExportSlot(ctx context.Context, args [][]byte) []byte {
	if len(args) != 5 {
		return command.Error(command.ErrArity(cmdExportSlot))
	}
	s, err1 := strconv.Atoi(string(args[1]))
	max, err2 := strconv.Atoi(string(args[4]))
	if err1 != nil || err2 != nil || s < 0 || s >= slot.Count || max <= 0 {
		return command.Error("ERR " + cmdExportSlot + ": bad slot or size")
	}
	var after []byte
	if strings.EqualFold(string(args[2]), "after") {
		after = args[3]
	}
	ex, ok := n.fsm.(slotExporter)
	if !ok {
		return command.Error("ERR " + cmdExportSlot + ": this state machine cannot export")
	}
	if reply := n.linearize(ctx); reply != nil {
		return reply
	}
	batch, last, done, err := ex.ExportSlot(s, after, max)
	if err != nil {
		return command.Error("ERR slot " + strconv.Itoa(s) + ": " + err.Error())
	}
	out := command.AppendArray(nil, 3)
	out = command.AppendBulk(out, batch)
	out = command.AppendBulk(out, last)
	d := int64(0)
	if done {
		d = 1
	}
	return command.AppendInt(out, d)
}

// fault is a test's failure injected before a step of the driver.
func (h *Host) fault(step string, mv SlotMove) error {
	if f := h.moveFault.Load(); f != nil {
		return (*f)(step, mv)
	}
	return nil
}

// emptyBatch reports an export batch of no key: its version byte, then a
// count of 0 (fsm's batch format, docs/sharding.md).
func emptyBatch(b string) bool { return len(b) == 2 && b[1] == 0 }

// notASlotStep is the refusal of a slot step the replica cannot decode.
// Releases from before SlotAbort answer an abort's step with exactly this
// text, and giveBack falls back on it: it must not change.
const notASlotStep = cmdSlotStep + ": not a slot step"
