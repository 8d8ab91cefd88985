package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Test-only directives, for the Jepsen suite (integration/). Each one makes a
// node wrong on purpose, so a node refuses them unless enable-debug-flags is
// set as well: a production config cannot set one by accident.
//
//	enable-debug-flags yes
//	debug-clock-offset 250ms     shift this node's clock (TTL workload)
//	debug-ack-before-commit yes  answer writes before they commit (loses writes)
//	debug-move-fault flip        fail the slot-move driver once before a step

// DebugFlags are the test-only settings.
type DebugFlags struct {
	Enabled         bool
	ClockOffset     time.Duration
	AckBeforeCommit bool
	MoveFault       string
}

func boolDirective(name string, field func(*Config) *bool) directive {
	return directive{name: name,
		set: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "yes":
				*field(c) = true
			case "no":
				*field(c) = false
			default:
				return errors.New("must be yes or no")
			}
			return nil
		},
		get: func(c *Config) string {
			if *field(c) {
				return "yes"
			}
			return "no"
		}}
}

func debugDirectives() []directive {
	return []directive{
		boolDirective("enable-debug-flags", func(c *Config) *bool { return &c.Debug.Enabled }).is("no",
			"Allow the test-only directives below."),
		{name: "debug-clock-offset",
			set: func(c *Config, v string) error {
				d, err := time.ParseDuration(v)
				if err != nil {
					return errors.New("must be a duration such as 250ms or -1s")
				}
				c.Debug.ClockOffset = d
				return nil
			},
			get: func(c *Config) string { return c.Debug.ClockOffset.String() }, def: "0s",
			doc: "Shift this node's clock by this much (TTL workload)."},
		boolDirective("debug-ack-before-commit", func(c *Config) *bool { return &c.Debug.AckBeforeCommit }).is("no",
			"Answer writes before they commit: loses acknowledged writes on failover, so that the checkers can be seen to notice."),
		{name: "debug-move-fault",
			set: func(c *Config, v string) error {
				switch v {
				case "", "copy", "flip", "drop", "abort-drop":
					c.Debug.MoveFault = v
					return nil
				}
				return errors.New("must be copy, flip, drop or abort-drop")
			},
			get: func(c *Config) string { return c.Debug.MoveFault }, def: "",
			doc: "Make this process's slot-move driver fail once before that step (copy, flip, drop, abort-drop), leaving the move half done for RAFT.SHARD ABORT or a rerun."},
	}
}

// check refuses a test-only setting without enable-debug-flags.
func (d DebugFlags) check() error {
	if d.Enabled {
		return nil
	}
	var set []string
	if d.ClockOffset != 0 {
		set = append(set, "debug-clock-offset "+d.ClockOffset.String())
	}
	if d.AckBeforeCommit {
		set = append(set, "debug-ack-before-commit yes")
	}
	if d.MoveFault != "" {
		set = append(set, "debug-move-fault "+d.MoveFault)
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%s: test-only, breaks the node on purpose; refused unless enable-debug-flags is yes",
		strings.Join(set, ", "))
}

// active lists the test-only settings in force, for a warning at start.
func (d DebugFlags) active() []any {
	if !d.Enabled {
		return nil
	}
	return []any{"debug-clock-offset", d.ClockOffset.String(),
		"debug-ack-before-commit", strconv.FormatBool(d.AckBeforeCommit), "debug-move-fault", d.MoveFault}
}
