package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Log format advertisement (rolling upgrades, docs/operations.md): every
// node answers raftset.formats with the highest log-entry format it reads
// (command.Version), and the leader asks every member of the configuration
// in turn. The leader proposes an entry only when every member reads its
// format: a member that answers lower holds writes back (-TRYAGAIN) instead
// of halting on an entry it cannot decode (fsm.halt). A member that cannot
// be asked counts as format 1, which every release reads; so does one that
// does not know the command, a release from before the advertisement.
//
// Each entry is written in the lowest format that carries it
// (command.EntryType.Version): batches and node addresses in format 1,
// which every release reads, so they are never held back; slot migration
// entries (TypeSlot) need format 2, and ProposeSlot refuses them until
// every member reads it. An abort's SlotAbort needs format 3; while a
// member reads only 2, ProposeSlot writes it as the format-2 SlotUnfreeze
// (an abort is a way out of a stuck move: it is not held back for an
// upgrade), which lacks its fence against a stale driver's freeze.
// A member that is downgraded under a leader that already knew its old
// answer is caught within one poll; entries proposed in between halt it
// with the fsm's clear message, and a newer release restarts it.

const (
	cmdFormats = "raftset.formats"
	// formatPoll is how often a leader asks every member again.
	formatPoll = time.Second
	// baseFormat is the format every release reads.
	baseFormat = 1
)

var formatsArgs = [][]byte{[]byte(cmdFormats)}

// errFormatHeld refuses a proposal that a member could not read.
var errFormatHeld = errors.New("a member reads an older log format")

// formats is the leader's view of its members' formats.
type formats struct {
	mu    sync.Mutex
	byID  map[string]int
	floor atomic.Int64 // the lowest format a member reads; 0 before the first poll
	low   atomic.Value // string: the member that reads floor, for the error
}

// readFormat is the highest format this node reads: command.Version, or
// what a test configured to simulate an older release.
func (n *Node) readFormat() int {
	if n.cfg.readFormat != 0 {
		return n.cfg.readFormat
	}
	return command.Version
}

// writeFormat is the format this node's batches need.
func (n *Node) writeFormat() int {
	if n.cfg.writeFormat != 0 {
		return n.cfg.writeFormat
	}
	return int(command.TypeBatch.Version())
}

// ProposeSlot proposes one slot migration step (docs/sharding.md, Moving a
// slot) on this leader and returns the state machine's reply: +OK, the
// number of keys an import stored or a drop deleted, or the error that
// refused the step (nothing applied); or the write path's TRYAGAIN (not
// proposed, also while a member reads only format 1) or CLUSTERDOWN
// (outcome unknown). Every step is idempotent for its epoch, so the
// driver resends it after either.
func (n *Node) ProposeSlot(ctx context.Context, op command.SlotOp) []byte {
	if op.Action == command.SlotAbort && n.checkFormat(command.SlotAbortVersion) != nil && n.checkFormat(command.SlotVersion) == nil {
		// A member reads format 2 only (a rolling upgrade): it gets the
		// abort's unfreeze in the form it reads, which leaves owned
		// slots' epochs as they are (docs/sharding.md, Aborting a move),
		// rather than an abort held back until the upgrade ends.
		n.log.Warn("a member reads log format 2: the abort unfreezes without raising owned slots' epochs",
			"first", op.First, "last", op.Last, "epoch", op.Epoch)
		op.Action = command.SlotUnfreeze
	}
	e := command.Entry{Type: command.TypeSlot, Slot: &op}
	if err := n.checkFormat(int(e.Version())); err != nil {
		return command.Error("TRYAGAIN slot " + strconv.Itoa(op.First) + "-" + strconv.Itoa(op.Last) + " was not changed: " + err.Error())
	}
	e.NowMs = n.nowMs()
	reply, _ := n.w.proposeEntry(ctx, e.Encode(nil))
	return reply
}

func (n *Node) serveFormats() []byte { return command.AppendInt(nil, int64(n.readFormat())) }

// askFormat asks one member for the format it reads.
func (n *Node) askFormat(ctx context.Context, addr string) (int, error) {
	o := n.call(ctx, &n.queries, addr, formatsArgs)
	switch o.kind {
	case applied:
		v, ok := parseIndex(o.reply)
		if !ok || v == 0 || v > 255 {
			return 0, errShape(cmdFormats, o.reply)
		}
		return int(v), nil
	case refused:
		if strings.Contains(strings.ToLower(string(o.reply)), "unknown command") {
			return baseFormat, nil // a release from before the advertisement
		}
		return 0, errors.New(cmdFormats + ": " + string(o.reply))
	}
	return 0, o.err
}

// runFormats keeps the floor of the members' formats while this node
// leads.
func (n *Node) runFormats() {
	defer n.wg.Done()
	t := time.NewTicker(formatPoll)
	defer t.Stop()
	for {
		if n.raft.State() == raft.Leader {
			ctx, cancel := context.WithTimeout(n.ctx, appliedQueryTimeout)
			n.pollFormats(ctx)
			cancel()
		}
		select {
		case <-t.C:
		case <-n.stopCh:
			return
		}
	}
}

// pollFormats asks every member and recomputes the floor.
func (n *Node) pollFormats(ctx context.Context) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	fs := &n.formats
	floor, low := n.readFormat(), n.cfg.NodeID
	seen := map[string]bool{}
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if id == n.cfg.NodeID {
			continue
		}
		seen[id] = true
		v := baseFormat
		if addr := n.fsm.ClientAddr(id); addr != "" {
			got, err := n.askFormat(ctx, addr)
			fs.mu.Lock()
			if err == nil {
				fs.byID[id] = got
			} else if last, ok := fs.byID[id]; ok {
				got = last // unreachable for now: keep its last answer
				err = nil
			}
			fs.mu.Unlock()
			if err == nil {
				v = got
			}
		}
		if v < floor {
			floor, low = v, id
		}
	}
	fs.mu.Lock()
	for id := range fs.byID {
		if !seen[id] {
			delete(fs.byID, id) // removed from the cluster
		}
	}
	fs.mu.Unlock()
	fs.low.Store(low)
	fs.floor.Store(int64(floor))
}

// checkFormat refuses a proposal of format version v that a member could
// not read. Before the first poll the floor is unknown; format 1 is always
// allowed.
func (n *Node) checkFormat(v int) error {
	if v <= baseFormat {
		if floor := n.formats.floor.Load(); floor == 0 || floor >= int64(v) {
			return nil
		}
	} else if floor := n.formats.floor.Load(); floor >= int64(v) {
		return nil
	}
	low, _ := n.formats.low.Load().(string)
	if low == "" {
		return fmt.Errorf("%w: the members' log formats are not known yet, this leader writes %d; retry", errFormatHeld, v)
	}
	return fmt.Errorf("%w: member %s reads log formats up to %d, this leader writes %d; upgrade it first",
		errFormatHeld, low, n.formats.floor.Load(), v)
}

// heldFuture is the future of an entry checkFormat held back: never
// appended.
type heldFuture struct{ err error }

func (f heldFuture) Error() error          { return f.err }
func (f heldFuture) Index() uint64         { return 0 }
func (f heldFuture) Response() interface{} { return nil }
