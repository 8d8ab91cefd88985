package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"raftset/internal/memlimit"
)

// gcPercent reads the collector's target in force without changing it.
func gcPercent() string { return strconv.Itoa(memlimit.RuntimePercent()) }

// TestGCPercent: the gc-percent directive sets the collector's target unless
// GOGC is set (an operator's explicit GOGC wins), CONFIG GET answers the
// target in force, and CONFIG SET changes it.
func TestGCPercent(t *testing.T) {
	t.Cleanup(func() { memlimit.SetPercent(100) }) // the test binary's own, as it started (go test sets no GOGC)
	t.Setenv("GOGC", "")
	def, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !applyGCPercent(def.GCPercent) {
		t.Fatal("applyGCPercent without GOGC changed nothing")
	}
	if got, want := gcPercent(), strconv.Itoa(def.GCPercent); got != want {
		t.Errorf("target after the default directive = %s, want %s", got, want)
	}
	cfg, err := LoadConfig([]string{"--gc-percent", "37"})
	if err != nil {
		t.Fatal(err)
	}
	applyGCPercent(cfg.GCPercent)
	if got := gcPercent(); got != "37" {
		t.Errorf("target after --gc-percent 37 = %s", got)
	}
	t.Setenv("GOGC", "80")
	if applyGCPercent(60) || gcPercent() != "37" {
		t.Errorf("with GOGC set, applyGCPercent(60) changed the target to %s", gcPercent())
	}
	if _, err := LoadConfig([]string{"--gc-percent", "0"}); err == nil {
		t.Error("gc-percent 0 accepted")
	}

	addr, _ := startNode(t, "")
	c := dial(t, addr)
	// CONFIG GET answers the directive (what CONFIG REWRITE writes), INFO
	// the target in force (here set by this test, not by the node).
	if r := do(t, c, "CONFIG", "GET", "gc-percent"); r != "*2\r\n$10\r\ngc-percent\r\n$2\r\n"+strconv.Itoa(def.GCPercent)+"\r\n" {
		t.Errorf("CONFIG GET gc-percent = %q", r)
	}
	if r := do(t, c, "INFO", "memory"); !strings.Contains(r, "\r\ngo_gc_percent:37\r\n") {
		t.Errorf("INFO memory has no go_gc_percent:37: %q", r)
	}
	if r := do(t, c, "CONFIG", "SET", "gc-percent", "45"); r != "+OK\r\n" {
		t.Fatalf("CONFIG SET gc-percent 45 = %q", r)
	}
	if got := gcPercent(); got != "45" {
		t.Errorf("target after CONFIG SET gc-percent 45 = %s", got)
	}
	if r := do(t, c, "CONFIG", "GET", "gc-percent"); r != "*2\r\n$10\r\ngc-percent\r\n$2\r\n45\r\n" {
		t.Errorf("CONFIG GET gc-percent after CONFIG SET = %q", r)
	}
	if r := do(t, c, "CONFIG", "SET", "gc-percent", "0"); r[0] != '-' || gcPercent() != "45" {
		t.Errorf("CONFIG SET gc-percent 0 = %q, target %s", r, gcPercent())
	}
}

// TestGCFollowLive: gc-follow-live (default yes) starts the soft memory
// limit that follows the live heap unless GOMEMLIMIT is set; CONFIG SET
// turns it off and on, and refuses anything but yes and no.
func TestGCFollowLive(t *testing.T) {
	t.Cleanup(func() { memlimit.Stop(); memlimit.SetCeiling(math.MaxInt64) })
	t.Setenv("GOMEMLIMIT", "")
	def, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.GCFollowLive != "yes" {
		t.Errorf("gc-follow-live default = %q, want yes", def.GCFollowLive)
	}
	if !applyGCFollowLive(def.GCFollowLive) || !memlimit.Following() {
		t.Error("the default directive did not start the limit")
	}
	// Following, the limit is set after a collection: no longer Go's
	// default of no limit.
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) == math.MaxInt64 {
		if time.Now().After(deadline) {
			t.Fatal("no memory limit after collections while following")
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // the follower runs on the finalizer goroutine
	}
	cfg, err := LoadConfig([]string{"--gc-follow-live", "no"})
	if err != nil {
		t.Fatal(err)
	}
	if applyGCFollowLive(cfg.GCFollowLive) || memlimit.Following() {
		t.Error("gc-follow-live no left the limit following")
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit after gc-follow-live no = %d, want none (no maxmemory)", got)
	}
	if _, err := LoadConfig([]string{"--gc-follow-live", "maybe"}); err == nil {
		t.Error("gc-follow-live maybe accepted")
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	if applyGCFollowLive("yes") || memlimit.Following() {
		t.Error("gc-follow-live yes followed although GOMEMLIMIT is set")
	}
	t.Setenv("GOMEMLIMIT", "")

	addr, _ := startNode(t, "")
	c := dial(t, addr)
	if r := do(t, c, "CONFIG", "GET", "gc-follow-live"); r != "*2\r\n$14\r\ngc-follow-live\r\n$3\r\nyes\r\n" {
		t.Errorf("CONFIG GET gc-follow-live = %q", r)
	}
	if r := do(t, c, "CONFIG", "SET", "gc-follow-live", "YES"); r != "+OK\r\n" || !memlimit.Following() {
		t.Errorf("CONFIG SET gc-follow-live YES = %q, following %v", r, memlimit.Following())
	}
	if r := do(t, c, "CONFIG", "SET", "gc-follow-live", "no"); r != "+OK\r\n" || memlimit.Following() {
		t.Errorf("CONFIG SET gc-follow-live no = %q, following %v", r, memlimit.Following())
	}
	if r := do(t, c, "CONFIG", "GET", "gc-follow-live"); r != "*2\r\n$14\r\ngc-follow-live\r\n$2\r\nno\r\n" {
		t.Errorf("CONFIG GET gc-follow-live after CONFIG SET no = %q", r)
	}
	if r := do(t, c, "CONFIG", "SET", "gc-follow-live", "maybe"); !strings.HasPrefix(r, "-ERR") || memlimit.Following() {
		t.Errorf("CONFIG SET gc-follow-live maybe = %q, following %v", r, memlimit.Following())
	}
}
