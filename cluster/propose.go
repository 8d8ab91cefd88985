package cluster

import (
	"context"
	"errors"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
)

// The write path (DESIGN.md, "Group commit and pacing").
//
// Every Write call becomes one writeReq on a queue. A single proposer
// goroutine takes everything queued, prepares each command (syntax check and
// relative→absolute time rewrite, on the leader's clock), packs the ops of
// many callers into one log entry (group commit) stamped with the leader's
// time, and hands it to raft.Apply: the only call of raft.Apply in raftset.
// It does not wait for the entry to commit before handing over the next,
// only for Raft to have stored it and, briefly, for that entry's writers to
// queue again (pace), so entries are in flight together: one being fsynced,
// earlier ones being replicated, committed and applied. A completer goroutine waits on
// the futures in order and gives every op its reply from the entry's
// fsm.ApplyResult.
//
// A request may span entries (only when it is bigger than one entry); a
// single op bigger than an entry is refused before proposing.

// writeReq states, guarded by writeReq.mu.

const (
	reqQueued    uint8 = iota // on the queue, untouched
	reqTaken                  // the proposer has it (or had it)
	reqAbandoned              // the caller gave up while it was queued
)

type writeReq struct {
	ops      []command.Op
	replies  [][]byte // one per op; slots are written by the proposer or the completer
	internal bool     // ops made by the node (expiry, config): not prepared

	// mu is held by the proposer from the moment it takes the request until
	// every op of it has been encoded, so a caller that gives up can wait
	// until its arguments are no longer read.
	mu    sync.Mutex
	state uint8

	// remaining counts the entries carrying ops of the request plus one hold
	// for the proposer; whoever brings it to zero signals done.
	remaining atomic.Int32
	done      chan struct{} // capacity 1

	// fate is the worst outcomeKind of the request's ops, for the node's
	// own proposals (submitOutcome), which must not read reply text to know
	// whether their entry was applied.
	fate atomic.Uint32
}

// worsen records that some op of the request ended as k.
func (r *writeReq) worsen(k outcomeKind) {
	for {
		old := r.fate.Load()
		if outcomeRank(outcomeKind(old)) >= outcomeRank(k) || r.fate.CompareAndSwap(old, uint32(k)) {
			return
		}
	}
}

// outcomeRank orders outcomes from applied to unknown, so that a request
// spanning entries reports the worst.
func outcomeRank(k outcomeKind) int {
	switch k {
	case applied:
		return 0
	case refused:
		return 1
	case notLeader, notApplied:
		return 2
	default:
		return 3
	}
}

// part maps ops [from, to) of a request to consecutive ops of an entry.
type part struct {
	req      *writeReq
	from, to int
}

// flight is an entry handed to Raft, waiting for its outcome.
type flight struct {
	fut   raft.ApplyFuture
	parts []part
	nops  int
	done  chan struct{} // closed once every op has its reply
}

// pendingEntry is the entry the proposer is filling.
type pendingEntry struct {
	now   int64
	ops   []command.Op // proposer scratch, reused
	parts []part
	size  int
	held  []*writeReq // requests whose last ops are in this entry
}

// entryOverhead bounds an entry's bytes besides its ops: version, type,
// nowMs and op count.
const entryOverhead = 2 + binaryMaxVarintLen64 + binaryMaxVarintLen64

const binaryMaxVarintLen64 = 10

type writer struct {
	n *Node

	mu     sync.Mutex
	queue  []*writeReq
	closed bool
	// gatherWant is the queue length at which a submit wakes the proposer
	// while pace gathers an entry's writers (0: every submit wakes it).
	gatherWant int

	// pause is held by the proposer while it turns a queue into entries;
	// DEBUG RELOAD holds it to keep new entries out.
	pause sync.Mutex

	sig     chan struct{} // capacity 1: "the queue is not empty"
	flights chan *flight
	pool    sync.Pool

	// Proposer-owned scratch.
	oom   bool // over maxmemory with nothing to evict (evict.go): for this batch
	spare []*writeReq
	prep  []command.Op
	cur   pendingEntry
	// storesBefore is the log store's write count just before the latest
	// entry was handed over (see pace).
	storesBefore uint64
	paceTimer    *time.Timer
	last         *flight   // the latest entry handed over
	handedAt     time.Time // when
}

func (w *writer) init(n *Node) {
	w.n = n
	w.sig = make(chan struct{}, 1)
	w.flights = make(chan *flight, n.cfg.MaxInflight)
	w.pool.New = func() any { return &writeReq{done: make(chan struct{}, 1)} }
}

// Write proposes ops through the Raft log and returns one RESP2 reply per op,
// in order, once the entry carrying them is committed and applied on this
// node. A follower forwards the ops to the leader (rpcsend.go) and relays
// its replies. Ops are OpCommand (a write command, name first), OpTx or OpReply.
// Replies: the state machine's; -TRYAGAIN when the write certainly was not
// appended (not the leader, no leader, shutting down); -CLUSTERDOWN when its
// outcome is unknown (leadership lost or the node stopped after it was
// proposed, or ctx ended after it was proposed). The caller keeps ownership
// of ops; they are not read after Write returns.
func (n *Node) Write(ctx context.Context, ops []command.Op) [][]byte {
	replies, _ := n.WriteIndexed(ctx, ops)
	return replies
}

// WriteIndexed is Write that also returns a log index such that a node that
// has applied it has applied these writes (0 when nothing is known). The
// front end keeps the largest per connection for WAIT.
func (n *Node) WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	if len(ops) == 0 {
		return nil, 0
	}
	if n.raft.State() != raft.Leader && !n.isClosing() {
		if _, addr := n.leaderClient(); addr != "" {
			return n.forwardWriteIndexed(ctx, ops)
		}
	}
	noops := n.answerNoops(ctx, ops)
	if len(noops) == len(ops) {
		return noops, n.fsm.AppliedIndex()
	}
	replies := n.w.submit(ctx, ops[len(noops):], false)
	if len(noops) > 0 {
		replies = append(noops, replies...)
	}
	// The replies come once the entry is applied here: the applied index is
	// now at or past the write's entry.
	return replies, n.fsm.AppliedIndex()
}

// submit queues ops for the proposer and returns one reply per op.
// Internal ops (made by the node itself) are logged as they are, without
// the state machine's preparation.
func (w *writer) submit(ctx context.Context, ops []command.Op, internal bool) [][]byte {
	out, _ := w.submitOutcome(ctx, ops, internal)
	return out
}

// submitOutcome is submit that also says whether the ops' entries were
// applied (applied: each reply is the state machine's), certainly not
// proposed (notApplied), refused before proposing (refused), or have an
// unknown fate (outcomeUnknown); the worst of them when they differ.
func (w *writer) submitOutcome(ctx context.Context, ops []command.Op, internal bool) ([][]byte, outcomeKind) {
	r := w.pool.Get().(*writeReq)
	r.ops, r.internal, r.state = ops, internal, reqQueued
	r.replies = make([][]byte, len(ops))
	r.fate.Store(uint32(applied))
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		out := r.replies
		fill(out, replyTryAgainClosing)
		w.recycle(r)
		return out, notApplied
	}
	w.queue = append(w.queue, r)
	wake := len(w.queue) >= w.gatherWant
	w.mu.Unlock()
	if wake {
		select {
		case w.sig <- struct{}{}:
		default:
		}
	}
	select {
	case <-r.done:
		out, fate := r.replies, outcomeKind(r.fate.Load())
		w.recycle(r)
		return out, fate
	case <-ctx.Done():
		return w.abandon(r, replyUnknownCanceled, replyTryAgainCanceled)
	case <-w.n.stopped:
		return w.abandon(r, replyUnknownShutdown, replyTryAgainClosing)
	}
}

// abandon answers a caller that stops waiting: "not proposed" if the
// proposer never took the request, "unknown" otherwise.
func (w *writer) abandon(r *writeReq, unknown, notProposed []byte) ([][]byte, outcomeKind) {
	select {
	case <-r.done:
		out, fate := r.replies, outcomeKind(r.fate.Load())
		w.recycle(r)
		return out, fate
	default:
	}
	r.mu.Lock() // waits while the proposer still reads r.ops
	st := r.state
	if st == reqQueued {
		r.state = reqAbandoned
	}
	r.mu.Unlock()
	reply, fate := unknown, outcomeUnknown
	if st == reqQueued {
		reply, fate = notProposed, notApplied
	}
	// r is not recycled: the completer may still write its replies.
	out := make([][]byte, len(r.ops))
	fill(out, reply)
	return out, fate
}

func (w *writer) recycle(r *writeReq) {
	r.ops, r.replies = nil, nil
	w.pool.Put(r)
}

func fill(dst [][]byte, reply []byte) {
	for i := range dst {
		dst[i] = reply
	}
}

// refuse answers every op of a queued request with reply, without proposing.
func (w *writer) refuse(r *writeReq, reply []byte) {
	r.mu.Lock()
	if r.state == reqAbandoned {
		r.mu.Unlock()
		return
	}
	r.state = reqTaken
	fill(r.replies, reply)
	r.worsen(notApplied)
	r.mu.Unlock()
	r.done <- struct{}{}
}

// release ends the proposer's hold on a request whose ops are all encoded.
func (w *writer) release(r *writeReq) {
	r.mu.Unlock()
	if r.remaining.Add(-1) == 0 {
		r.done <- struct{}{}
	}
}

// runProposer is the proposer goroutine.
func (n *Node) runProposer() {
	defer n.wg.Done()
	w := &n.w
	defer close(w.flights)
	for {
		select {
		case <-w.sig:
		case <-n.stopCh:
			w.mu.Lock()
			w.closed = true
			q := w.queue
			w.queue = nil
			w.mu.Unlock()
			for _, r := range q {
				w.refuse(r, replyTryAgainClosing)
			}
			return
		}
		for !n.isClosing() {
			if !w.proposeQueued() {
				break
			}
		}
	}
}

// Pacing. Raft's leader loop takes an entry, stores and fsyncs it, and only
// then takes the next one; the proposer blocks in raft.Apply meanwhile. An
// entry built right after the previous hand-over would carry only the few
// writes queued by then, and everything arriving during the fsync would wait
// for the entry after it. So after a hand-over the proposer waits:
//
//  1. until the log store has finished a write after it, fsync included
//     (storeNotifier tells; when the leader defers its fsync, leadersync.go,
//     the syncer tells once the fsync is done, so entries gather as many
//     writes as when the leader loop was held by it);
//  2. then, briefly, for the writers of that entry to come back: until the
//     entry is applied and nine in ten of its requests (all of them when
//     followers must store it: returnAll) are queued again (on top of those
//     queued meanwhile). Busy clients answer within
//     microseconds, and waiting for them merges the two half-groups that
//     would otherwise alternate between fsyncs into one, so entries grow
//     and fsyncs are fewer. This wait is bounded by gatherFactor times the
//     time the store took, so clients that do not come back cost a bounded
//     delay, and an entry of a single request never waits. With three
//     nodes the entry is applied only after a follower stored it too, so
//     the bound, not the writers, usually ends the wait, and a longer
//     bound puts more writes in each entry; docs/benchmarks.md has the
//     measurements that chose the factor.
//
// Both waits are event-driven and bounded by paceMax.
const (
	paceMax      = 5 * time.Millisecond
	gatherFactor = 8
)

func (w *writer) pace() {
	n := w.n
	if w.paceTimer == nil {
		w.paceTimer = time.NewTimer(paceMax)
	} else {
		w.paceTimer.Reset(paceMax)
	}
	defer w.paceTimer.Stop()
	for n.stores.count.Load() <= w.storesBefore {
		select {
		case <-n.stores.signal:
		case <-w.paceTimer.C:
			return
		case <-n.stopCh:
			return
		}
	}
	fl, stored := w.last, time.Since(w.handedAt)
	if fl == nil || len(fl.parts) < 2 {
		return
	}
	w.paceTimer.Stop()
	w.paceTimer.Reset(min(gatherFactor*stored, paceMax))
	// Writers queued now are others (they cannot have had their reply from
	// this entry yet): wait for them plus most of this entry's, or all of
	// them when a follower's store is part of the cycle (returnAll).
	back := len(fl.parts) * 9 / 10
	if returnAll(n) {
		back = len(fl.parts)
	}
	want := w.queued() + back
	select {
	case <-fl.done:
	case <-w.paceTimer.C:
		return
	case <-n.stopCh:
		return
	}
	defer w.gathered(0)
	for !w.gathered(want) {
		select {
		case <-w.sig:
		case <-w.paceTimer.C:
			return
		case <-n.stopCh:
			return
		}
	}
}

// returnAll reports whether the pace waits for every writer of an entry
// to come back rather than nine in ten: when an entry commits only after a
// follower stored it. The cycle is then long (two fsyncs and a round trip),
// a writer that misses an entry waits a whole cycle, and the last tenth
// costs little to wait for: three nodes at SADD -P1 -c50 gained about 4%
// with all fifty (45 → 50 ops per entry). A sole voter's cycle is short, and
// waiting for its last writers lengthened it by more than they added (one
// node at -P1 lost 12%: docs/benchmarks.md, session 19, "Gathering all of
// an entry's writers").
func returnAll(n *Node) bool {
	return !n.soleVoter()
}

func (w *writer) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// gathered reports whether want requests are queued; until they are, only
// the submit that brings the queue to want wakes the proposer. Woken by
// every submit, the proposer rose about 25 times per entry under
// SPOP -P10 only to count the queue and sleep again (docs/benchmarks.md,
// session 10). gathered(0) restores a wake per submit.
func (w *writer) gathered(want int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) >= want {
		w.gatherWant = 0
		return true
	}
	w.gatherWant = want
	return false
}

// storeNotifier wraps the log store to count and signal completed writes
// (pace).
type storeNotifier struct {
	raft.LogStore
	count  atomic.Uint64
	signal chan struct{} // capacity 1

	// lead, when set, lets a leader's batch be stored with its fsync
	// deferred (leadersync.go); such a store is counted when its fsync
	// is done (durable), which is what the pacing waits for.
	lead *leaderSyncs

	// Entries and data bytes stored (log retention, retention.go).
	entries, bytes atomic.Uint64
}

func (s *storeNotifier) StoreLogs(logs []*raft.Log) error {
	// Timed here, whichever store is below (raft-boltdb times only itself,
	// raft-wal reports to no go-metrics): the fsync time operators watch
	// (a leader's write alone when its fsync is deferred).
	defer gometrics.MeasureSince(storeLogsKey, time.Now())
	var err error
	deferred := false
	if s.lead != nil {
		deferred, err = s.lead.store(s.LogStore, logs)
	} else {
		err = s.LogStore.StoreLogs(logs)
	}
	if err == nil {
		var b int
		for _, l := range logs {
			b += len(l.Data)
		}
		s.entries.Add(uint64(len(logs)))
		s.bytes.Add(uint64(b))
	}
	if !deferred {
		s.stored(1)
	}
	return err
}

// stored counts batches whose store (fsync included) is done.
func (s *storeNotifier) stored(batches uint64) {
	s.count.Add(batches)
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// storeLogsKey is exported as raftset_log_store_logs_seconds.
var storeLogsKey = []string{"raftset", "log", "storeLogs"}

func (s *storeNotifier) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// IsMonotonic passes on the store's raft.MonotonicLogStore: raft-wal refuses
// a gap in indexes, so after installing a snapshot Raft must empty the log
// instead of appending past a gap (the embedded interface hides the method).
func (s *storeNotifier) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// proposeQueued proposes everything queued and reports whether there was
// anything.
func (w *writer) proposeQueued() bool {
	w.pause.Lock()
	defer w.pause.Unlock()
	q := w.take()
	if len(q) == 0 {
		return false
	}
	proposed := w.propose(q)
	clear(q)
	w.spare = q[:0]
	if proposed {
		w.pace()
	}
	return true
}

func (w *writer) take() []*writeReq {
	w.mu.Lock()
	q := w.queue
	w.queue = w.spare
	w.spare = nil
	w.mu.Unlock()
	return q
}

// propose turns the queued requests into as few log entries as the size
// caps allow, and reports whether it handed any to Raft.
func (w *writer) propose(q []*writeReq) bool {
	n := w.n
	if n.raft.State() != raft.Leader {
		reply := notLeaderWrite(n.Leader())
		for _, r := range q {
			w.refuse(r, reply)
		}
		return false
	}
	if !n.clock.isAnchored() {
		// A new leader that never saw an entry time stamps nothing
		// until it applied its predecessors' entries (Node.leading).
		if err := n.awaitTermApplied(n.raft.CurrentTerm()); err != nil {
			for _, r := range q {
				w.refuse(r, replyTryAgainNotReady)
			}
			return false
		}
	}
	now := n.nowMs()
	w.oom = n.refuseOOM(n.evictor())
	w.startEntry(now)
	maxOp := n.cfg.MaxEntryBytes - entryOverhead
	maxSingle := max(n.cfg.MaxOpBytes, n.cfg.MaxEntryBytes) - entryOverhead
	for _, r := range q {
		r.mu.Lock()
		if r.state == reqAbandoned {
			r.mu.Unlock()
			continue
		}
		r.state = reqTaken
		r.remaining.Store(1)

		w.prep = w.prep[:0]
		allErrors := true
		for i := range r.ops {
			p := w.prepare(&r.ops[i], now, r.internal)
			if p.Kind != command.OpReply {
				allErrors = false
			}
			w.prep = append(w.prep, p)
		}
		if allErrors {
			// Errors found without state never reach the log.
			for i := range w.prep {
				r.replies[i] = w.prep[i].Reply
			}
			r.worsen(refused)
			w.release(r)
			continue
		}
		for i := range w.prep {
			p := &w.prep[i]
			size := opSize(p)
			if size > maxSingle {
				r.replies[i] = tooLarge(size, maxSingle)
				r.worsen(refused)
				continue
			}
			// An op over the group-commit target still goes, alone in its
			// entry: the flushes around it keep other writes' entries small.
			e := &w.cur
			if len(e.ops) > 0 && (e.size+size > maxOp || len(e.ops) >= n.cfg.MaxEntryOps) {
				w.flush()
				w.startEntry(now)
			}
			w.add(r, i, p, size)
		}
		w.cur.held = append(w.cur.held, r)
	}
	sent := w.flush()
	clear(w.prep)
	return sent
}

// prepare returns the op to log for op: commands are checked and rewritten
// by the state machine (in a transaction too); errors pass as they are.
func (w *writer) prepare(op *command.Op, now int64, internal bool) command.Op {
	if w.oom && !internal {
		if p := oomOp(*op); p.Kind == command.OpReply && op.Kind != command.OpReply {
			return p
		}
	}
	switch op.Kind {
	case command.OpCommand:
		if internal {
			return *op
		}
		return w.n.fsm.Prepare(op.Args, now)
	case command.OpTx:
		if op.Tx == nil {
			return command.Op{Kind: command.OpReply, Reply: command.Error("ERR empty transaction")}
		}
		tx := &command.Tx{Watches: op.Tx.Watches, Ops: make([]command.Op, len(op.Tx.Ops))}
		for i := range op.Tx.Ops {
			in := &op.Tx.Ops[i]
			if in.Kind == command.OpCommand {
				tx.Ops[i] = w.n.fsm.Prepare(in.Args, now)
			} else {
				tx.Ops[i] = *in
			}
		}
		return command.Op{Kind: command.OpTx, Tx: tx}
	default:
		return *op
	}
}

func (w *writer) startEntry(now int64) {
	e := &w.cur
	e.now = now
	e.ops = e.ops[:0]
	e.parts = nil
	e.size = 0
	e.held = e.held[:0]
}

func (w *writer) add(r *writeReq, i int, p *command.Op, size int) {
	e := &w.cur
	e.ops = append(e.ops, *p)
	e.size += size
	if k := len(e.parts) - 1; k >= 0 && e.parts[k].req == r && e.parts[k].to == i {
		e.parts[k].to++
		return
	}
	e.parts = append(e.parts, part{req: r, from: i, to: i + 1})
	r.remaining.Add(1)
}

// flush encodes the pending entry, releases the requests it finishes and
// proposes it, reporting whether it did. An empty entry only releases.
func (w *writer) flush() bool {
	n := w.n
	e := &w.cur
	if len(e.ops) == 0 {
		for _, r := range e.held {
			w.release(r)
		}
		clear(e.held)
		return false
	}
	ent := command.Entry{Type: command.TypeBatch, NowMs: e.now, Ops: e.ops}
	data := ent.Encode(make([]byte, 0, e.size+entryOverhead))
	nops := len(e.ops)
	early := n.ackEarly(e.ops) // nil unless the test-only AckBeforeCommit is set
	clear(e.ops)               // drop references to the callers' arguments
	for _, r := range e.held {
		w.release(r)
	}
	clear(e.held)
	n.st.entries.Add(1)
	n.st.ops.Add(uint64(nops))
	n.obs.batchOps.Add(time.Duration(nops)) // a count, in the histogram's units
	w.storesBefore = n.stores.count.Load()
	var fut raft.ApplyFuture
	if err := n.checkFormat(n.writeFormat()); err != nil {
		fut = heldFuture{err}
	} else {
		fut = early.wrap(n.raft.Apply(data, n.cfg.ApplyTimeout))
	}
	fl := &flight{fut: fut, parts: e.parts, nops: nops, done: make(chan struct{})}
	w.last, w.handedAt = fl, time.Now()
	w.flights <- fl
	e.parts = nil
	return true
}

// runCompleter hands each op its reply, entry by entry, in log order.
func (n *Node) runCompleter() {
	defer n.wg.Done()
	for fl := range n.w.flights {
		var replies [][]byte
		var errReply []byte
		var errFate outcomeKind
		if err := fl.fut.Error(); err != nil {
			errReply, errFate = applyErrorReply(err), applyErrorOutcome(err)
			if errors.Is(err, raft.ErrNotLeader) {
				errReply = notLeaderWrite(n.Leader())
			}
			n.log.Debug("write not applied", "ops", fl.nops, "error", err)
		} else {
			var ok bool
			resp := fl.fut.Response()
			replies, ok = repliesOf(resp)
			dropReplies(resp)
			if !ok || len(replies) != fl.nops {
				n.log.Error("state machine reply does not match the entry", "ops", fl.nops, "replies", len(replies))
				errReply, errFate = replyUnknownInternal, outcomeUnknown
			}
		}
		k := 0
		for _, p := range fl.parts {
			r := p.req
			if errReply != nil {
				r.worsen(errFate)
			}
			for i := p.from; i < p.to; i++ {
				if errReply != nil {
					r.replies[i] = errReply
				} else {
					r.replies[i] = replies[k]
				}
				k++
			}
			if r.remaining.Add(-1) == 0 {
				r.done <- struct{}{}
			}
		}
		close(fl.done)
	}
}

// opSize is the exact encoded size of an op in a log entry.
func opSize(op *command.Op) int {
	switch op.Kind {
	case command.OpCommand:
		return 1 + argsSize(op.Args)
	case command.OpTx:
		s := 1 + uvarintLen(uint64(len(op.Tx.Watches)))
		for _, wt := range op.Tx.Watches {
			s += bytesSize(wt.Key) + 1 + uvarintLen(wt.Stamp)
		}
		s += uvarintLen(uint64(len(op.Tx.Ops)))
		for i := range op.Tx.Ops {
			s += opSize(&op.Tx.Ops[i])
		}
		return s
	default:
		return 1 + bytesSize(op.Reply)
	}
}

func argsSize(args [][]byte) int {
	s := uvarintLen(uint64(len(args)))
	for _, a := range args {
		s += bytesSize(a)
	}
	return s
}

func bytesSize(b []byte) int { return uvarintLen(uint64(len(b))) + len(b) }

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// proposeEntry hands an already encoded entry of a type other than a batch
// (node metadata, meta.go) to Raft and waits until it is applied here. Such
// entries are rare and carry no client writes, so they skip the queue and
// group commit; holding pause keeps them from racing the proposer's own
// raft.Apply calls, and DEBUG RELOAD keeps them out as it keeps batches
// out. The reply is +OK or one of the write path's TRYAGAIN (not proposed)
// and CLUSTERDOWN (outcome unknown) replies, and the outcome says which.
func (w *writer) proposeEntry(ctx context.Context, data []byte) ([]byte, outcomeKind) {
	n := w.n
	w.pause.Lock()
	switch {
	case n.isClosing():
		w.pause.Unlock()
		return replyTryAgainClosing, notApplied
	case n.raft.State() != raft.Leader:
		w.pause.Unlock()
		return notLeaderWrite(n.Leader()), notLeader
	}
	// Not checkFormat: node addresses are of an ignorable type, which a
	// member that does not know them skips; ProposeSlot checks its own.
	n.st.entries.Add(1)
	fut := n.raft.Apply(data, n.cfg.ApplyTimeout)
	w.pause.Unlock()
	// Waiting on the future in a goroutine lets the caller go at ctx's end
	// or shutdown: Raft may drop the future of an entry it had not applied
	// when it shut down, and then this goroutine stays until the process
	// ends (as the completer's wait would; see Close).
	res := make(chan error, 1)
	go func() { res <- fut.Error() }()
	select {
	case err := <-res:
		switch {
		case err == nil:
			if r, ok := fut.Response().(*fsm.ApplyResult); ok && len(r.Replies) == 1 {
				return r.Replies[0], applied // a slot step's own reply
			}
			return command.OK, applied
		case errors.Is(err, raft.ErrNotLeader):
			return notLeaderWrite(n.Leader()), notLeader
		default:
			return applyErrorReply(err), applyErrorOutcome(err)
		}
	case <-ctx.Done():
		return replyUnknownCanceled, outcomeUnknown
	case <-n.stopped:
		return replyUnknownShutdown, outcomeUnknown
	}
}
