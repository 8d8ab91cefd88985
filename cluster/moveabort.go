package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"raftset/internal/command"
	"raftset/internal/slot"
)

// Aborting a move (docs/sharding.md, Aborting a move): RAFT.SHARD ABORT
// undoes the move in the map while it has not flipped. Before the flip
// every write to the range went to A (B refuses every command on a slot it
// imports) and A still holds every key of it, so giving the range back to
// A loses nothing: A unfreezes it, B drops what it imported. After the flip B may have acknowledged writes that A
// never saw, so the move can only be completed.

// cmdAbortMove is RAFT.SHARD ABORT relayed to the metadata leader's
// process: raftset.shard <MetaGroup> raftset.abortmove [relayed].
const cmdAbortMove = "raftset.abortmove"

// errFlipped: the move to abort has flipped.
var errFlipped = errors.New("flipped")

// abortMove runs RAFT.SHARD ABORT here when this process's metadata voter
// leads, else on the metadata leader's process. rng is the range of the
// move to abort, nil for the only move in progress.
func (h *Host) abortMove(ctx context.Context, rng []string, relayed bool) []byte {
	args := append([][]byte{[]byte(cmdAbortMove)}, bytesOf(rng)...)
	return h.relayToMeta(ctx, "ABORT", runAgain, args, relayed, func() []byte { return h.driveAbort(ctx, rng) })
}

func bytesOf(s []string) [][]byte {
	out := make([][]byte, len(s))
	for i, v := range s {
		out[i] = []byte(v)
	}
	return out
}

// driveAbort aborts the move in progress of range rng (nil: the only one),
// or finishes aborting it: +OK once the map shows it no more (also when
// there was none).
func (h *Host) driveAbort(ctx context.Context, rng []string) []byte {
	h.moveMu.RLock()
	defer h.moveMu.RUnlock()
	mv, err := h.abort(ctx, rng)
	switch {
	case errors.Is(err, errFlipped):
		return command.Error(fmt.Sprintf("ERR ABORT: slots %d-%d already belong to shard %d (map epoch %d): the move can only be completed: RAFT.SHARD MOVESLOTS %d %d %d",
			mv.First, mv.Last, mv.To, mv.Flip, mv.First, mv.Last, mv.To))
	case errors.As(err, new(whichMoveError)):
		return command.Error("ERR ABORT: " + err.Error())
	case err != nil && mv != nil:
		return command.Error(fmt.Sprintf("ERR ABORT of the move of slots %d-%d from shard %d to %d: %v (run it again to resume)",
			mv.First, mv.Last, mv.From, mv.To, err))
	case err != nil:
		return command.Error("ERR ABORT: " + err.Error() + " (run it again to resume)")
	}
	return command.OK
}

// whichMoveError: ABORT cannot tell which move to abort.
type whichMoveError string

func (e whichMoveError) Error() string { return string(e) }

// whichMove is the move of cur that ABORT with range rng (nil: none
// given) aborts, nil when there is none to abort.
func whichMove(cur *ShardMap, rng []string) (*SlotMove, error) {
	if rng == nil {
		switch len(cur.Moves) {
		case 0:
			return nil, nil
		case 1:
			return &cur.Moves[0], nil
		}
		ranges := make([]string, len(cur.Moves))
		for i, mv := range cur.Moves {
			ranges[i] = fmt.Sprintf("%d-%d", mv.First, mv.Last)
		}
		return nil, whichMoveError(fmt.Sprintf("%d moves are in progress (%s): name one: RAFT.SHARD ABORT <first> <last> (%s)",
			len(cur.Moves), movesList(cur.Moves), strings.Join(ranges, ", ")))
	}
	first, last, err := abortRange(rng)
	if err != nil {
		return nil, err
	}
	if p := cur.moveOfRange(first, last); p != nil {
		return p, nil
	}
	if o, ok := cur.overlapping(first, last); ok {
		return nil, whichMoveError(fmt.Sprintf("no move of slots %d-%d, but the move of %s overlaps them: RAFT.SHARD ABORT %d %d",
			first, last, o, o.First, o.Last))
	}
	return nil, nil // none: an abort repeated after it completed
}

// abort undoes a move of the map: mark it aborting (a new epoch, so no
// driver can resume it and the steps below outrank every step it took),
// unfreeze the range in From, drop it in To (deleting any partial import),
// then the map stable without it. Each step is idempotent for the abort's
// epoch, so a failed abort is resumed by running it again. It returns the
// move it found.
func (h *Host) abort(ctx context.Context, rng []string) (*SlotMove, error) {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, nil // nothing in progress
	}
	found, err := whichMove(cur, rng)
	if found == nil || err != nil {
		return nil, err
	}
	// A driver of the move running here finishes (or fails) first, as
	// the abort's steps would race its own.
	first, last := found.First, found.Last
	if err := h.lockRange(ctx, first, last); err != nil {
		return found, err
	}
	defer h.unlockRange(first, last)
	var mv *SlotMove
	marked := false
	_, err = h.mapStep(ctx, "mark", func(cur *ShardMap) (*ShardMap, error) {
		p := cur.moveOfRange(first, last)
		marked = false
		if p == nil {
			mv = nil // completed or aborted meanwhile
			return nil, nil
		}
		m := *p
		mv = &m
		if p.Flip != 0 {
			return nil, errFlipped
		}
		if p.Abort != 0 {
			return nil, nil
		}
		next := cur.clone()
		next.Epoch++
		p = next.moveOfRange(first, last)
		p.Abort = next.Epoch
		m, marked = *p, true
		return next, nil
	})
	if marked && err == nil {
		h.log.Info("aborting slot move", "first", mv.First, "last", mv.Last, "from", mv.From, "to", mv.To, "epoch", mv.Abort)
	}
	if mv == nil || err != nil {
		return mv, err
	}
	if err := h.giveBack(ctx, mv); err != nil {
		return mv, fmt.Errorf("unfreeze in shard %d: %w", mv.From, err)
	}
	if err := h.fault("abort-drop", *mv); err != nil {
		return mv, err
	}
	if _, err := h.slotStep(ctx, mv.To, command.SlotOp{Action: command.SlotDrop, First: first, Last: last, Epoch: mv.Abort}); err != nil {
		return mv, fmt.Errorf("drop in shard %d: %w", mv.To, err)
	}
	done, err := h.mapStep(ctx, "stable", func(cur *ShardMap) (*ShardMap, error) {
		if p := cur.moveOfRange(first, last); p == nil || p.Abort != mv.Abort {
			return nil, nil // done by another run of the abort
		}
		next := cur.clone()
		next.Epoch++
		next.dropMove(first, last)
		return next, nil
	})
	if err != nil {
		return mv, err
	}
	h.log.Info("aborted slot move", "first", mv.First, "last", mv.Last, "from", mv.From, "to", mv.To, "epoch", done.Epoch)
	return mv, nil
}

// giveBack returns the range to From at the abort's epoch with SlotAbort,
// which also raises the epoch of slots the move never froze: a driver of
// the move still running on a former metadata leader then has its freeze
// refused (it is of the move's older epoch) instead of freezing the range
// after the abort. A shard leader of a release from before SlotAbort
// cannot decode the step (format 3); it gets the format-2 SlotUnfreeze,
// which leaves owned slots' epochs, as that release's aborts did.
func (h *Host) giveBack(ctx context.Context, mv *SlotMove) error {
	op := command.SlotOp{Action: command.SlotAbort, First: mv.First, Last: mv.Last, Epoch: mv.Abort}
	_, err := h.slotStep(ctx, mv.From, op)
	if err != nil && strings.Contains(err.Error(), notASlotStep) {
		h.log.Warn("shard leader reads no SlotAbort (an older release): unfreezing without raising owned slots' epochs",
			"shard", mv.From, "first", mv.First, "last", mv.Last, "epoch", mv.Abort)
		op.Action = command.SlotUnfreeze
		_, err = h.slotStep(ctx, mv.From, op)
	}
	return err
}

// abortCmd is RAFT.SHARD ABORT [<first> <last>].
func (h *Host) abortCmd(ctx context.Context, args [][]byte) []byte {
	switch len(args) {
	case 2:
		return h.abortMove(ctx, nil, false)
	case 4:
		rng := []string{string(args[2]), string(args[3])}
		// Refused here, as MOVESLOTS refuses its range, rather than by
		// the metadata leader.
		if _, _, err := abortRange(rng); err != nil {
			return command.Error("ERR ABORT: " + err.Error())
		}
		return h.abortMove(ctx, rng, false)
	}
	return command.Error(command.ErrArity("raft.shard|abort"))
}

// abortRange reads ABORT's <first> <last> as MOVESLOTS reads its range
// (parseSlotRange).
func abortRange(rng []string) (int, int, error) {
	first, last, ok := parseSlotRange([]byte(rng[0]), []byte(rng[1]))
	if !ok {
		return 0, 0, whichMoveError(fmt.Sprintf("%s %s is not a slot range (slots are 0-%d)", rng[0], rng[1], slot.Count-1))
	}
	return first, last, nil
}

// abortInternal is raftset.abortmove [<first> <last>] [relayed] from
// another process.
func (h *Host) abortInternal(ctx context.Context, args [][]byte) []byte {
	relayed := len(args) > 1 && string(args[len(args)-1]) == string(relayedArg)
	if relayed {
		args = args[:len(args)-1]
	}
	switch len(args) {
	case 1:
		return h.abortMove(ctx, nil, relayed)
	case 3:
		return h.abortMove(ctx, []string{string(args[1]), string(args[2])}, relayed)
	}
	return command.Error(command.ErrArity(cmdAbortMove))
}
