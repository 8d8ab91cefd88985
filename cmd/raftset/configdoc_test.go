package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md and default.conf from the directive table")

// The checked-in documentation is what the directive table prints: a
// directive added without regenerating them fails here.
func TestConfigDocs(t *testing.T) {
	for _, tc := range []struct {
		path string
		text string
	}{
		{filepath.Join("..", "..", "docs", "configuration.md"), configMarkdown()},
		{"default.conf", configFile()},
	} {
		if *update {
			if err := os.WriteFile(tc.path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.text {
			t.Errorf("%s is out of date: go test ./cmd/raftset -run TestConfigDocs -update", tc.path)
		}
	}
}

// Every directive is documented, its default parses, and what Get returns
// reads back to the same value (CONFIG REWRITE writes Get's value).
func TestDirectiveTable(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range directives() {
		if seen[d.name] {
			t.Errorf("directive %s appears twice", d.name)
		}
		seen[d.name] = true
		if d.doc == "" || d.section == "" {
			t.Errorf("directive %s has no meaning or section", d.name)
		}
		c := &Config{}
		if err := d.set(c, d.def); err != nil {
			t.Errorf("%s: default %q: %v", d.name, d.def, err)
			continue
		}
		v := d.get(c)
		c2 := &Config{}
		if err := d.set(c2, v); err != nil || d.get(c2) != v {
			t.Errorf("%s: Get %q reads back as %q, %v", d.name, v, d.get(c2), err)
		}
	}
	// The example config file is the defaults.
	path := filepath.Join(t.TempDir(), "raftset.conf")
	if err := os.WriteFile(path, []byte(configFile()), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := LoadConfig([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range directives() {
		if a, b := d.get(fromFile), d.get(builtin); a != b {
			t.Errorf("default.conf gives %s %q, the built-in default is %q", d.name, a, b)
		}
	}
}

func TestHelpListsEveryDirective(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help exited %d: %s", code, errb.String())
	}
	for _, d := range directives() {
		line := "  --" + d.name + " "
		if !strings.Contains(out.String(), line) {
			t.Errorf("--help does not list %s", d.name)
		}
	}
	if !strings.Contains(out.String(), "  --raft-heartbeat-timeout 500ms\n      A follower that hears nothing") {
		t.Errorf("--help does not give the heartbeat timeout's default and meaning:\n%s", out.String())
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--version"}, &out, &out); code != 0 {
		t.Fatalf("--version exited %d", code)
	}
	want := "raftset " + version + " commit=unknown go=" + runtime.Version() + " "
	if !strings.HasPrefix(out.String(), want) {
		t.Errorf("--version = %q, want it to start with %q (go test stamps no commit)", out.String(), want)
	}
	old := commit
	commit = "0123abc"
	defer func() { commit = old }()
	out.Reset()
	run([]string{"version"}, &out, &out)
	if !strings.Contains(out.String(), " commit=0123abc ") {
		t.Errorf("version with -X main.commit = %q", out.String())
	}
}

func TestTimerDirectives(t *testing.T) {
	c, err := LoadConfig([]string{"--raft-heartbeat-timeout", "2s", "--raft-election-timeout", "3s",
		"--raft-leader-lease-timeout", "1s", "--raft-commit-timeout", "20ms", "--raft-max-append-entries", "256"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HeartbeatTimeout.String() != "2s" || c.ElectionTimeout.String() != "3s" || c.LeaderLeaseTimeout.String() != "1s" ||
		c.CommitTimeout.String() != "20ms" || c.MaxAppendEntries != 256 {
		t.Errorf("config = %+v", c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--raft-heartbeat-timeout", "0"}, "must be a positive duration"},
		{[]string{"--raft-heartbeat-timeout", "soon"}, "must be a positive duration"},
		{[]string{"--raft-max-append-entries", "2000"}, "from 1 to 1024"},
		{[]string{"--raft-leader-lease-timeout", "600ms"}, "raft-leader-lease-timeout 600ms: must not exceed raft-heartbeat-timeout 500ms"},
		{[]string{"--raft-heartbeat-timeout", "1s"}, "raft-election-timeout 500ms: must be at least raft-heartbeat-timeout 1s"},
		{[]string{"--raft-commit-timeout", "100us"}, "raft-commit-timeout 100µs: must be at least 1ms"},
		{[]string{"--raft-heartbeat-timeout", "4ms", "--raft-leader-lease-timeout", "4ms"}, "raft-heartbeat-timeout 4ms: must be at least 5ms"},
	} {
		_, err := LoadConfig(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadConfig(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
