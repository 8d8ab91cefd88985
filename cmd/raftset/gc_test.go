package main

import (
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// gcPercent reads the collector's target in force without changing it.
func gcPercent() string {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return strconv.Itoa(p)
}

// TestGCPercent: the gc-percent directive sets the collector's target unless
// GOGC is set (an operator's explicit GOGC wins), CONFIG GET answers the
// target in force, and CONFIG SET changes it.
func TestGCPercent(t *testing.T) {
	t.Cleanup(func() { debug.SetGCPercent(100) }) // the test binary's own, as it started (go test sets no GOGC)
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
