package main

import (
	"strings"
	"testing"
	"time"
)

// The test-only switches are refused unless enable-debug-flags is set, in
// whatever order the directives come.
func TestDebugFlagsNeedTheGuard(t *testing.T) {
	for _, args := range [][]string{
		{"--debug-clock-offset", "250ms"},
		{"--debug-ack-before-commit", "yes"},
		{"--debug-move-fault", "flip"},
		{"--enable-debug-flags", "no", "--debug-clock-offset", "-1s"},
	} {
		_, err := LoadConfig(args)
		if err == nil || !strings.Contains(err.Error(), "enable-debug-flags") {
			t.Errorf("LoadConfig(%q) error = %v, want a refusal naming enable-debug-flags", args, err)
		}
	}
	c, err := LoadConfig([]string{"--debug-clock-offset", "-250ms", "--debug-ack-before-commit", "yes", "--debug-move-fault", "flip", "--enable-debug-flags", "yes"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Debug.ClockOffset != -250*time.Millisecond || !c.Debug.AckBeforeCommit || c.Debug.MoveFault != "flip" {
		t.Errorf("debug flags = %+v", c.Debug)
	}
	if v, _ := c.Get("debug-clock-offset"); v != "-250ms" {
		t.Errorf("CONFIG GET debug-clock-offset = %q", v)
	}
	for _, bad := range [][]string{{"--debug-clock-offset", "soon"}, {"--enable-debug-flags", "maybe"}, {"--debug-move-fault", "own"}} {
		if _, err := LoadConfig(bad); err == nil {
			t.Errorf("LoadConfig(%q) accepted", bad)
		}
	}
	// Off by default, and the defaults pass the guard.
	c, err = LoadConfig(nil)
	if err != nil || c.Debug != (DebugFlags{}) {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}
