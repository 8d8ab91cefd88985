//go:build jepsen

package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// procIDs hands out Jepsen process ids; a worker takes a new one after an
// indeterminate operation (the old one may still have an op in flight).
type procIDs struct{ n atomic.Int64 }

func (p *procIDs) next() int { return int(p.n.Add(1) - 1) }

// worker is one client thread: one connection at a time to one node.
type worker struct {
	rec     *recorder
	cl      Cluster
	ids     *procIDs
	proc    int
	node    int // index into cl.Nodes()
	c       *conn
	timeout time.Duration
	rnd     *rand.Rand
	// readOnly issues READONLY on every new connection (stale local reads).
	readOnly bool
	// pin: never move to another node after an error.
	pin bool
}

func (w *worker) nodeID() string { return w.cl.Nodes()[w.node%len(w.cl.Nodes())] }

// connect dials the worker's node; on failure it moves to the next node
// and backs off briefly (pacing, bounded by the caller's loop).
func (w *worker) connect(ctx context.Context) bool {
	if w.c != nil {
		return true
	}
	c, err := dialConn(w.cl.Addr(w.nodeID()), w.timeout)
	if err == nil && w.readOnly {
		if r, err2 := c.Do("READONLY"); err2 != nil || r.IsError() {
			c.Close()
			err = fmt.Errorf("READONLY: %v %v", r.Str, err2)
		}
	}
	if err != nil {
		if !w.pin {
			w.node++
		}
		sleepCtx(ctx, 50*time.Millisecond)
		return false
	}
	w.c = c
	return true
}

// do runs one recorded operation. f is sadd, srem, sismember or smembers.
func (w *worker) do(f, key string, elem int64) op {
	args := []string{f, key}
	if f != "smembers" {
		args = append(args, strconv.FormatInt(elem, 10))
	}
	return w.exec(op{F: f, Key: key, Elem: elem}, args, parseSetReply)
}

// parseSetReply reads an integer or a list of integer members.
func parseSetReply(o *op, r reply) error {
	switch r.Kind {
	case ':':
		n, err := intOf(r)
		if err != nil {
			return err
		}
		o.N = n
	case '*':
		for _, e := range r.Elems {
			v, err := strconv.ParseInt(e.Str, 10, 64)
			if err != nil {
				return fmt.Errorf("unparsable member %q", e.Str)
			}
			o.Members = append(o.Members, v)
		}
	default:
		return fmt.Errorf("unexpected reply %q", r.Str)
	}
	return nil
}

// workerPool is what every workload's clients share: the recorder, the
// cluster, the process ids and the per-operation timeout.
type workerPool struct {
	rec     *recorder
	cl      Cluster
	ids     *procIDs
	timeout time.Duration
}

// run starts n workers (worker i first dials node start+i, seeded with
// seed and stream+i, pinned when i < pinned) and drives each until it
// has done maxOps operations, tried 10×maxOps times, or ctx ends. step
// runs operation number k of worker i on its connected worker and
// reports whether it ran one (false: ctx ended while it waited). A pinned
// worker whose operation failed waits 20 ms before the next: on a node
// without a leader it would otherwise spin on -TRYAGAIN.
func (p workerPool) run(ctx context.Context, n, maxOps int, seed, stream uint64, start, pinned int, step func(w *worker, i, k int) (op, bool)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{rec: p.rec, cl: p.cl, ids: p.ids, proc: p.ids.next(), node: start + i, timeout: p.timeout,
				rnd: rand.New(rand.NewPCG(seed, stream+uint64(i))), pin: i < pinned}
			defer func() {
				if w.c != nil {
					w.c.Close()
				}
			}()
			for k, tries := 0, 0; k < maxOps && tries < 10*maxOps && ctx.Err() == nil; tries++ {
				if !w.connect(ctx) {
					continue
				}
				o, ran := step(w, i, k)
				if !ran {
					return
				}
				k++
				if w.pin && o.Outcome == outFail {
					sleepCtx(ctx, 20*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// settle sets o's outcome from the reply r (or the error err) to it;
// parse fills o's result from a reply that is not an error, and a parse
// error makes the outcome indeterminate.
func settle(o *op, r reply, err error, parse func(*op, reply) error) {
	o.Outcome = classify(r, err)
	switch {
	case err != nil:
		o.Err = err.Error()
	case r.IsError():
		o.Err = r.Str
	default:
		if perr := parse(o, r); perr != nil {
			o.Outcome, o.Err = outInfo, perr.Error()
		}
	}
}

// exec runs one recorded operation: o (its arguments set) as args on the
// worker's connection; parse fills o's result from a reply that is not an
// error (a parse error makes the outcome indeterminate). A -MOVED reply
// (sharded clusters) is followed once, as a cluster client would: the op's
// outcome is the named node's reply, and o.Moved records the redirect; a
// second -MOVED is a failure (not applied), a redirect that could not be
// sent too. The worker stays on its own node for the next op. After a non-ok
// outcome the worker reconnects, to the next node unless pinned, and
// after an indeterminate one it takes a new process id.
func (w *worker) exec(o op, args []string, parse func(*op, reply) error) op {
	o.Proc, o.Node = w.proc, w.nodeID()
	o.Call = w.rec.invokeOp(o)
	r, err := w.c.Do(args...)
	if to := movedTo(r); err == nil && to != "" {
		o.Moved = r.Str
		r, err = redirect(to, w.timeout, args)
	}
	o.Ret = w.rec.now()
	settle(&o, r, err, parse)
	if errors.Is(err, errNotSent) {
		o.Outcome = outFail
	}
	w.rec.complete(o)
	if o.Outcome != outOK {
		if w.c.broken {
			w.c = nil
		} else {
			w.c.Close()
			w.c = nil
		}
		if !w.pin {
			w.node++
		}
		if o.Outcome == outInfo {
			w.proc = w.ids.next()
		}
	}
	return o
}

// linWorkload: per-key sets (workload a). Workers come in groups of
// groupSize sharing a key; each worker moves to a fresh key every
// opsPerKey operations, so each porcupine partition stays small.
type linWorkload struct {
	Workers   int
	GroupSize int
	OpsPerKey int
	Elems     int64
	MaxOps    int // per worker, a hard bound
	// Pinned: the first Pinned workers stay on their node after errors
	// (the others move on), so a node cut off or paused keeps being
	// asked and whatever it answers is checked.
	Pinned int
}

func (lw linWorkload) run(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, seed uint64, timeout time.Duration) {
	lastInfo := make([]bool, lw.Workers)
	workerPool{rec, cl, ids, timeout}.run(ctx, lw.Workers, lw.MaxOps, seed, 1000, 0, lw.Pinned, func(w *worker, i, k int) (op, bool) {
		key := fmt.Sprintf("lin:%d:%d", i/lw.GroupSize, k/lw.OpsPerKey)
		elem := w.rnd.Int64N(lw.Elems)
		var f string
		switch p := w.rnd.IntN(100); {
		case lastInfo[i] || p < 25:
			f = "smembers" // after an indeterminate write, read
		case p < 50:
			f = "sismember"
		case p < 80:
			f = "sadd"
		default:
			f = "srem"
		}
		o := w.do(f, key, elem)
		lastInfo[i] = o.Outcome == outInfo
		return o, true
	})
}

// setWorkload: Jepsen's set workload (b): unique SADDs to one key, or
// spread over Keys (sharded rows: sets in every shard, moved while they
// are written). Elements are unique across keys, so an element that
// turns up in another set than the one it was added to is unexpected
// there.
type setWorkload struct {
	Workers int
	Key     string
	// Keys, when set, replace Key: add number n goes to Keys[n%len(Keys)].
	Keys   []string `json:",omitempty"`
	MaxOps int      // per worker
}

// keys are the sets the workload writes.
func (sw setWorkload) keys() []string {
	if len(sw.Keys) > 0 {
		return sw.Keys
	}
	return []string{sw.Key}
}

func (sw setWorkload) run(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, timeout time.Duration) []op {
	var (
		mu   sync.Mutex
		adds []op
		next atomic.Int64
	)
	keys := sw.keys()
	workerPool{rec, cl, ids, timeout}.run(ctx, sw.Workers, sw.MaxOps, 0, 0, 1, 0, func(w *worker, _, _ int) (op, bool) {
		e := next.Add(1)
		o := w.do("sadd", keys[e%int64(len(keys))], e)
		mu.Lock()
		adds = append(adds, o)
		mu.Unlock()
		return o, true
	})
	return adds
}

// finalReads reads the whole set from every node (a linearizable read on
// each), bounded polling until each node answers.
func finalReads(cl Cluster, key string, within time.Duration) ([][]int64, error) {
	var out [][]int64
	for _, id := range cl.Nodes() {
		deadline := time.Now().Add(within)
		var got []int64
		var lastErr error
		ok := false
		for i := 0; i < 100 && !ok && time.Now().Before(deadline); i++ {
			r, err := doFollow(cl.Addr(id), 3*time.Second, "SMEMBERS", key)
			if err != nil || r.Kind != '*' {
				lastErr = fmt.Errorf("%v %q", err, r.Str)
				time.Sleep(200 * time.Millisecond)
				continue
			}
			got = got[:0]
			for _, e := range r.Elems {
				v, err := strconv.ParseInt(e.Str, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s: unparsable member %q", id, e.Str)
				}
				got = append(got, v)
			}
			ok = true
		}
		if !ok {
			return nil, fmt.Errorf("final read on %s: %v", id, lastErr)
		}
		out = append(out, got)
	}
	return out, nil
}
