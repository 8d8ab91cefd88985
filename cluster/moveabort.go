package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"raftset/internal/command"
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
// leads, else on the metadata leader's process.
func (h *Host) abortMove(ctx context.Context, relayed bool) []byte {
	return h.relayToMeta(ctx, "ABORT", [][]byte{[]byte(cmdAbortMove)}, relayed, func() []byte { return h.driveAbort(ctx) })
}

// driveAbort aborts the move in progress, or finishes aborting it: +OK
// once no move is in the map (also when there was none).
func (h *Host) driveAbort(ctx context.Context) []byte {
	h.moveMu.Lock()
	defer h.moveMu.Unlock()
	mv, err := h.abort(ctx)
	switch {
	case errors.Is(err, errFlipped):
		return command.Error(fmt.Sprintf("ERR ABORT: slots %d-%d already belong to shard %d (map epoch %d): the move can only be completed: RAFT.SHARD MOVESLOTS %d %d %d",
			mv.First, mv.Last, mv.To, mv.Flip, mv.First, mv.Last, mv.To))
	case err != nil && mv != nil:
		return command.Error(fmt.Sprintf("ERR ABORT of the move of slots %d-%d from shard %d to %d: %v (run it again to resume)",
			mv.First, mv.Last, mv.From, mv.To, err))
	case err != nil:
		return command.Error("ERR ABORT: " + err.Error() + " (run it again to resume)")
	}
	return command.OK
}

// abort undoes the map's move: mark it aborting (a new epoch, so no driver
// can resume it and the steps below outrank every step it took), unfreeze
// the range in From, drop it in To (deleting any partial import), then the
// map stable without it. Each step is idempotent for the abort's epoch, so
// a failed abort is resumed by running it again. It returns the move it
// found.
func (h *Host) abort(ctx context.Context) (*SlotMove, error) {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return nil, err
	}
	if cur == nil || cur.Move == nil {
		return nil, nil // nothing in progress: an abort repeated after it completed
	}
	mv := cur.Move
	if mv.Flip != 0 {
		return mv, errFlipped
	}
	if mv.Abort == 0 {
		next := cur.clone()
		next.Epoch++
		next.Move.Abort = next.Epoch
		if err := h.metaCAS(ctx, cur, next); err != nil {
			return mv, fmt.Errorf("mark: %w", err)
		}
		cur, mv = next, next.Move
		h.log.Info("aborting slot move", "first", mv.First, "last", mv.Last, "from", mv.From, "to", mv.To, "epoch", mv.Abort)
	}
	a := mv.Abort
	if err := h.giveBack(ctx, mv); err != nil {
		return mv, fmt.Errorf("unfreeze in shard %d: %w", mv.From, err)
	}
	if err := h.fault("abort-drop"); err != nil {
		return mv, err
	}
	if _, err := h.slotStep(ctx, mv.To, command.SlotOp{Action: command.SlotDrop, First: mv.First, Last: mv.Last, Epoch: a}); err != nil {
		return mv, fmt.Errorf("drop in shard %d: %w", mv.To, err)
	}
	next := cur.clone()
	next.Epoch++
	next.Move = nil
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return mv, fmt.Errorf("stable: %w", err)
	}
	h.log.Info("aborted slot move", "first", mv.First, "last", mv.Last, "from", mv.From, "to", mv.To, "epoch", next.Epoch)
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

// abortCmd is RAFT.SHARD ABORT.
func (h *Host) abortCmd(ctx context.Context, args [][]byte) []byte {
	if len(args) != 2 {
		return command.Error(command.ErrArity("raft.shard|abort"))
	}
	return h.abortMove(ctx, false)
}

// abortInternal is raftset.abortmove [relayed] from another process.
func (h *Host) abortInternal(ctx context.Context, args [][]byte) []byte {
	if len(args) != 1 && len(args) != 2 {
		return command.Error(command.ErrArity(cmdAbortMove))
	}
	return h.abortMove(ctx, len(args) == 2)
}
