package main

import (
	"os"

	"raftset/internal/memlimit"
)

// applyGCPercent sets the collector's target from the gc-percent directive,
// unless GOGC is set in the environment: the runtime has applied that one
// already, and an operator's explicit GOGC wins, as GOMEMLIMIT wins over the
// limit derived from maxmemory. It reports whether it changed anything.
// While the limit follows the live heap (gc-follow-live), the runtime's
// target is raised for a small heap (memlimit.Percent).
//
// Why raftset chooses its own default rather than Go's 100: while writes
// pour in, the heap peaks at about (1 + GOGC/100) × what survives a
// collection, and the dataset is nearly all of what survives; Go's default
// let a node peak at twice its dataset during the seed's 10M SADDs, 1.8× the
// peak of a Redis holding the same sets (docs/benchmarks.md, issue 14).
func applyGCPercent(p int) bool {
	if os.Getenv("GOGC") != "" {
		return false
	}
	memlimit.SetPercent(p)
	return true
}

// applyGCFollowLive starts or stops the soft memory limit that follows the
// live heap (gc-follow-live; internal/memlimit says why). It reports
// whether the limit follows the heap now: never while GOMEMLIMIT is set.
func applyGCFollowLive(v string) bool {
	if v != "yes" {
		memlimit.Stop()
		return false
	}
	return memlimit.Follow()
}
