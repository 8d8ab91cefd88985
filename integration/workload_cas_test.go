//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"raftset/integration/check"
)

// casWorkload: registers with compare-and-set (workload e), checked by
// check.Register. Workers come in groups of GroupSize sharing a key
// cas:<group>:<gen> and move to a fresh key every OpsPerKey operations
// (small porcupine partitions). GET 40 %, SET 15 %, CAS 45 % (EVAL of
// check.CASScript) over values 0..Values-1, so CASes from one value race
// and most lose; after an indeterminate write the next op is a GET.
type casWorkload struct {
	Workers   int
	GroupSize int
	OpsPerKey int
	Values    int
	MaxOps    int // per worker, a hard bound
	// Pinned: the first Pinned workers stay on their node after errors.
	Pinned int
}

// step issues one random register operation on key.
func (cw casWorkload) step(w *worker, key string, readNext bool) op {
	val := func() string { return strconv.Itoa(w.rnd.IntN(cw.Values)) }
	p := w.rnd.IntN(100)
	switch {
	case readNext || p < 40:
		return w.exec(op{F: "get", Key: key}, []string{"GET", key}, parseGet)
	case p < 55:
		v := val()
		return w.exec(op{F: "set", Key: key, Value: v}, []string{"SET", key, v}, parseOK)
	default:
		expect, v := val(), val()
		return w.exec(op{F: "cas", Key: key, Expect: expect, Value: v},
			[]string{"EVAL", check.CASScript, "1", key, expect, v}, parseCAS)
	}
}

// parseCAS reads the script's 1 (swapped) or 0.
func parseCAS(o *op, r reply) error {
	n, err := intOf(r)
	if err != nil {
		return err
	}
	if n != 0 && n != 1 {
		return fmt.Errorf("CAS script answered %d", n)
	}
	o.N = n
	return nil
}

func (cw casWorkload) run(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, seed uint64, timeout time.Duration) {
	readNext := make([]bool, cw.Workers)
	workerPool{rec, cl, ids, timeout}.run(ctx, cw.Workers, cw.MaxOps, seed, 3000, 0, cw.Pinned, func(w *worker, i, k int) (op, bool) {
		o := cw.step(w, fmt.Sprintf("cas:%d:%d", i/cw.GroupSize, k/cw.OpsPerKey), readNext[i])
		readNext[i] = o.Outcome == outInfo
		return o, true
	})
}
