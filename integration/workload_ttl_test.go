//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// ttlWorkload: string keys with TTLs (workload c), checked by check.TTL
// against a model that allows the clocks' uncertainty. Workers come in
// groups of GroupSize sharing a key and move to a fresh key every
// OpsPerKey operations (small porcupine partitions). Each worker waits a
// random Think between operations, so that keys live through several
// operations and expire while they are watched.
type ttlWorkload struct {
	Workers   int
	GroupSize int
	OpsPerKey int
	// TTLs of SET PX / SET EX / EXPIRE are drawn from [MinTTL, MaxTTL].
	MinTTL, MaxTTL time.Duration
	Think          time.Duration // mean pause between a worker's operations
	MaxOps         int           // per worker, a hard bound
	// Probers, besides the Workers, watch keys expire (expiryProbe).
	Probers int
}

// An expiry probe SETs a fresh key with PX ttl (at least probeMinTTL), then
// GETs it at probeAt × ttl after the SET returned. While cluster time
// slews, a TTL lasts 5% longer or shorter in real time, so the reads past
// 1.0 find the key alive, or those before it find it gone, where exact
// clocks forbid it: the TTL rows' can-fail check needs such a read, and
// the random workers, whose groups keep rewriting their keys, landed few
// near an expiry (clock-behind seed 797983218 saw only 144 gone reads and
// exact clocks "Ok" with 42.8 s of slew).
var probeAt = []float64{0.96, 0.98, 1.02, 1.04}

const probeMinTTL = time.Second

// ttlProbePrefix begins the probes' keys (under the TTL check's "ttl:").
const ttlProbePrefix = "ttl:probe:"

type expiryProbe struct {
	key  string
	ttl  time.Duration
	set  time.Time // when the SET returned
	left int       // reads still to make (probeAt's last left); 0: SET a new key
}

// probe issues the probe's next operation: a read at its time, or the
// SET of a new probe.
func (tw ttlWorkload) probe(ctx context.Context, w *worker, pr *expiryProbe, i, k int) (op, bool) {
	if pr.left > 0 {
		at := pr.set.Add(time.Duration(probeAt[len(probeAt)-pr.left] * float64(pr.ttl)))
		if sleepCtx(ctx, time.Until(at)) != nil {
			return op{}, false
		}
		pr.left--
		return get(w, pr.key), true
	}
	// Paced as the workers are, so that SETs refused while there is no
	// leader do not spin.
	if tw.think(ctx, w) != nil {
		return op{}, false
	}
	lo := max(tw.MinTTL, probeMinTTL)
	pr.ttl = randomDuration(w, lo, max(tw.MaxTTL, lo))
	pr.key = fmt.Sprintf("%s%d:%d", ttlProbePrefix, i, k)
	o := setPX(w, pr.key, "p", pr.ttl.Milliseconds())
	pr.set = time.Now()
	if o.Outcome == outOK {
		pr.left = len(probeAt)
	}
	return o, true
}

// think is a worker's pause between operations: uniform in [0, 2 Think].
func (tw ttlWorkload) think(ctx context.Context, w *worker) error {
	return sleepCtx(ctx, randomDuration(w, 0, 2*tw.Think))
}

// randomDuration is uniform in [lo, hi].
func randomDuration(w *worker, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rnd.Int64N(int64(hi-lo)+1))
}

func setPX(w *worker, key, value string, ms int64) op {
	return w.exec(op{F: "set", Key: key, Value: value, TTLms: ms},
		[]string{"SET", key, value, "PX", strconv.FormatInt(ms, 10)}, parseOK)
}

func get(w *worker, key string) op {
	return w.exec(op{F: "get", Key: key}, []string{"GET", key}, parseGet)
}

func parseOK(o *op, r reply) error {
	if r.Kind != '+' || r.Str != "OK" {
		return fmt.Errorf("unexpected reply %q", r.Str)
	}
	return nil
}

func parseInt(o *op, r reply) error {
	n, err := intOf(r)
	if err != nil {
		return err
	}
	o.N = n
	return nil
}

func parseGet(o *op, r reply) error {
	switch {
	case r.Kind == '$' && r.Null:
		o.Nil = true
	case r.Kind == '$':
		o.Value = r.Str
	default:
		return fmt.Errorf("unexpected reply %q", r.Str)
	}
	return nil
}

// step issues one random TTL operation on key; after an indeterminate
// write the next one is a read.
func (tw ttlWorkload) step(w *worker, key, value string, readNext bool) op {
	ms := randomDuration(w, tw.MinTTL, tw.MaxTTL).Milliseconds()
	secs := max(1, (ms+500)/1000) // EX and EXPIRE take seconds
	p := w.rnd.IntN(100)
	if readNext {
		p = 60 + p*40/100
	}
	switch {
	case p < 20:
		return setPX(w, key, value, ms)
	case p < 30:
		return w.exec(op{F: "set", Key: key, Value: value, TTLms: secs * 1000},
			[]string{"SET", key, value, "EX", strconv.FormatInt(secs, 10)}, parseOK)
	case p < 35:
		return w.exec(op{F: "set", Key: key, Value: value}, []string{"SET", key, value}, parseOK)
	case p < 50:
		return w.exec(op{F: "expire", Key: key, TTLms: secs * 1000},
			[]string{"EXPIRE", key, strconv.FormatInt(secs, 10)}, parseInt)
	case p < 80:
		return get(w, key)
	case p < 90:
		return w.exec(op{F: "ttl", Key: key}, []string{"TTL", key}, parseInt)
	default:
		return w.exec(op{F: "pttl", Key: key}, []string{"PTTL", key}, parseInt)
	}
}

func (tw ttlWorkload) run(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, seed uint64, timeout time.Duration) {
	var probers sync.WaitGroup
	defer probers.Wait()
	if tw.Probers > 0 {
		probers.Go(func() { tw.runProbers(ctx, rec, cl, ids, seed, timeout) })
	}
	readNext := make([]bool, tw.Workers)
	workerPool{rec, cl, ids, timeout}.run(ctx, tw.Workers, tw.MaxOps, seed, 2000, 0, 0, func(w *worker, i, k int) (op, bool) {
		if tw.think(ctx, w) != nil {
			return op{}, false
		}
		key := fmt.Sprintf("ttl:%d:%d", i/tw.GroupSize, k/tw.OpsPerKey)
		o := tw.step(w, key, fmt.Sprintf("w%d-%d", i, k), readNext[i])
		readNext[i] = o.Outcome == outInfo && (o.F == "set" || o.F == "expire")
		return o, true
	})
}

// runProbers runs the Probers (expiryProbe) beside run's workers.
func (tw ttlWorkload) runProbers(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, seed uint64, timeout time.Duration) {
	probes := make([]expiryProbe, tw.Probers)
	workerPool{rec, cl, ids, timeout}.run(ctx, tw.Probers, tw.MaxOps, seed, 2100, 0, 0, func(w *worker, i, k int) (op, bool) {
		return tw.probe(ctx, w, &probes[i], i, k)
	})
}
