//go:build jepsen

package integration

import (
	"context"
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
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
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

// exec runs one recorded operation: o (its arguments set) as args on the
// worker's connection; parse fills o's result from a reply that is not an
// error (a parse error makes the outcome indeterminate). After a non-ok
// outcome the worker reconnects, to the next node unless pinned, and
// after an indeterminate one it takes a new process id.
func (w *worker) exec(o op, args []string, parse func(*op, reply) error) op {
	o.Proc, o.Node = w.proc, w.nodeID()
	o.Call = w.rec.invokeOp(o)
	r, err := w.c.Do(args...)
	o.Ret = w.rec.now()
	o.Outcome = classify(r, err)
	switch {
	case err != nil:
		o.Err = err.Error()
	case r.IsError():
		o.Err = r.Str
	default:
		if perr := parse(&o, r); perr != nil {
			o.Outcome, o.Err = outInfo, perr.Error()
		}
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
	var wg sync.WaitGroup
	for i := range lw.Workers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := &worker{rec: rec, cl: cl, ids: ids, proc: ids.next(), node: i, timeout: timeout,
				rnd: rand.New(rand.NewPCG(seed, uint64(1000+i))), pin: i < lw.Pinned}
			defer func() {
				if w.c != nil {
					w.c.Close()
				}
			}()
			group := i / lw.GroupSize
			lastInfo := false
			for n, tries := 0, 0; n < lw.MaxOps && tries < 10*lw.MaxOps && ctx.Err() == nil; tries++ {
				if !w.connect(ctx) {
					continue
				}
				key := fmt.Sprintf("lin:%d:%d", group, n/lw.OpsPerKey)
				elem := w.rnd.Int64N(lw.Elems)
				var f string
				switch p := w.rnd.IntN(100); {
				case lastInfo || p < 25:
					f = "smembers" // after an indeterminate write, read
				case p < 50:
					f = "sismember"
				case p < 80:
					f = "sadd"
				default:
					f = "srem"
				}
				o := w.do(f, key, elem)
				lastInfo = o.Outcome == outInfo
				n++
				if w.pin && o.Outcome == outFail {
					// Pacing: a pinned worker on a node without a
					// leader would otherwise spin on -TRYAGAIN.
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		}(i)
	}
	wg.Wait()
}

// setWorkload: Jepsen's set workload (b): unique SADDs to one key.
type setWorkload struct {
	Workers int
	Key     string
	MaxOps  int // per worker
}

func (sw setWorkload) run(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, timeout time.Duration) []op {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		adds []op
		next atomic.Int64
	)
	for i := range sw.Workers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := &worker{rec: rec, cl: cl, ids: ids, proc: ids.next(), node: i + 1, timeout: timeout}
			defer func() {
				if w.c != nil {
					w.c.Close()
				}
			}()
			for n, tries := 0, 0; n < sw.MaxOps && tries < 10*sw.MaxOps && ctx.Err() == nil; tries++ {
				if !w.connect(ctx) {
					continue
				}
				o := w.do("sadd", sw.Key, next.Add(1))
				mu.Lock()
				adds = append(adds, o)
				mu.Unlock()
				n++
			}
		}(i)
	}
	wg.Wait()
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
			c, err := dialConn(cl.Addr(id), 3*time.Second)
			if err != nil {
				lastErr = err
				time.Sleep(200 * time.Millisecond)
				continue
			}
			r, err := c.Do("SMEMBERS", key)
			c.Close()
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
