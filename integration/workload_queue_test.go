//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// queueWorkload: SPOP as a queue (workload d). Producers SADD unique
// integers to Key, consumers SPOP from it; after healing, a final SMEMBERS
// on every node (check.Queue).
type queueWorkload struct {
	Producers int
	Consumers int
	Key       string
	MaxOps    int // per worker, a hard bound
}

func parseSpop(o *op, r reply) error {
	switch {
	case r.Kind == '$' && r.Null:
		o.Nil = true
	case r.Kind == '$':
		v, err := strconv.ParseInt(r.Str, 10, 64)
		if err != nil {
			return fmt.Errorf("unparsable member %q", r.Str)
		}
		o.Elem = v
	default:
		return fmt.Errorf("unexpected reply %q", r.Str)
	}
	return nil
}

// run drives producers and consumers until ctx ends or MaxOps; consumers
// that find the queue empty pace themselves (an empty SPOP is cheap, and a
// tight loop of them would starve the producers on two cores).
func (qw queueWorkload) run(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, timeout time.Duration) {
	var next atomic.Int64
	workerPool{rec, cl, ids, timeout}.run(ctx, qw.Producers+qw.Consumers, qw.MaxOps, 0, 0, 0, 0, func(w *worker, i, _ int) (op, bool) {
		if i < qw.Producers {
			return w.do("sadd", qw.Key, next.Add(1)), true
		}
		o := w.exec(op{F: "spop", Key: qw.Key}, []string{"SPOP", qw.Key}, parseSpop)
		if o.Outcome == outOK && o.Nil {
			sleepCtx(ctx, 5*time.Millisecond)
		}
		return o, true
	})
}
