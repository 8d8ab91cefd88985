//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"strconv"
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
	ttl := tw.MinTTL + time.Duration(w.rnd.Int64N(int64(tw.MaxTTL-tw.MinTTL)+1))
	ms := ttl.Milliseconds()
	secs := max(1, (ms+500)/1000) // EX and EXPIRE take seconds
	p := w.rnd.IntN(100)
	if readNext {
		p = 60 + p*40/100
	}
	switch {
	case p < 20:
		return w.exec(op{F: "set", Key: key, Value: value, TTLms: ms},
			[]string{"SET", key, value, "PX", strconv.FormatInt(ms, 10)}, parseOK)
	case p < 30:
		return w.exec(op{F: "set", Key: key, Value: value, TTLms: secs * 1000},
			[]string{"SET", key, value, "EX", strconv.FormatInt(secs, 10)}, parseOK)
	case p < 35:
		return w.exec(op{F: "set", Key: key, Value: value}, []string{"SET", key, value}, parseOK)
	case p < 50:
		return w.exec(op{F: "expire", Key: key, TTLms: secs * 1000},
			[]string{"EXPIRE", key, strconv.FormatInt(secs, 10)}, parseInt)
	case p < 80:
		return w.exec(op{F: "get", Key: key}, []string{"GET", key}, parseGet)
	case p < 90:
		return w.exec(op{F: "ttl", Key: key}, []string{"TTL", key}, parseInt)
	default:
		return w.exec(op{F: "pttl", Key: key}, []string{"PTTL", key}, parseInt)
	}
}

func (tw ttlWorkload) run(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, seed uint64, timeout time.Duration) {
	readNext := make([]bool, tw.Workers)
	workerPool{rec, cl, ids, timeout}.run(ctx, tw.Workers, tw.MaxOps, seed, 2000, 0, 0, func(w *worker, i, k int) (op, bool) {
		if sleepCtx(ctx, time.Duration(w.rnd.Int64N(2*int64(tw.Think)+1))) != nil {
			return op{}, false
		}
		key := fmt.Sprintf("ttl:%d:%d", i/tw.GroupSize, k/tw.OpsPerKey)
		o := tw.step(w, key, fmt.Sprintf("w%d-%d", i, k), readNext[i])
		readNext[i] = o.Outcome == outInfo && (o.F == "set" || o.F == "expire")
		return o, true
	})
}
