package cluster

import "time"

// now is this node's clock for everything that decides expiry: the time a
// leader stamps on an entry (and turns relative TTLs into deadlines with),
// the clock a read checks deadlines against, and active expiry's sample.
// Config.ClockOffset shifts it, so the Jepsen suite can give one node a
// skewed clock without touching the machine's (test-only).
func (n *Node) now() time.Time { return time.Now().Add(n.cfg.ClockOffset) }
