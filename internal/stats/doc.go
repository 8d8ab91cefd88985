// Package stats holds the counters that the front end (resp) and the node
// (cluster) keep for INFO, SLOWLOG, LATENCY and the metrics endpoint: a
// fixed-layout latency histogram that many goroutines add to with one atomic
// add, and the plain records the metrics package reads at scrape time. It
// imports nothing of raftset, so both sides can share it without importing
// each other.
package stats
