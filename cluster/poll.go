package cluster

import (
	"context"
	"errors"
	"time"
)

// errPollLimit is poll's answer when its time limit passed first. Callers
// replace it with what they waited for and what they saw last, which only
// they know.
var errPollLimit = errors.New("cluster: the time limit passed")

// poll calls try until it reports done (nil), every interval while it does
// not, for up to limit (then errPollLimit): the admin steps' way of
// waiting for a shard or the map to reach a state, or of retrying while
// the cluster cannot serve them yet. ctx's end returns ctx's error and the
// host's shutdown an error, sooner than the limit. The limit is checked
// after a failed try, so a state reached during the last interval still
// counts.
func (h *Host) poll(ctx context.Context, limit, interval time.Duration, try func() bool) error {
	deadline := time.Now().Add(limit)
	for !try() {
		if time.Now().After(deadline) {
			return errPollLimit
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.stop:
			return errors.New("shutting down")
		case <-time.After(interval):
		}
	}
	return nil
}
