package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"raftset/internal/testutil"
)

// TestRedis72Goldens runs the steps of testdata/redis72/*.txt (replies where
// Redis 7.2 differs from 7.0; the format is in its README) on raftset and on
// Debian's redis-server 7.0: raftset must give the 7.2 reply, and 7.0 its
// own, so each file documents a difference that is real.
func TestRedis72Goldens(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "redis72", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	redis := testutil.StartRedis(t)
	addr, _ := startNode(t, "")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			steps := readGolden(t, file)
			ours, theirs := dial(t, addr), dial(t, redis.Addr)
			for _, c := range []*testutil.RESPClient{ours, theirs} {
				do(t, c, "FLUSHALL")
			}
			for _, st := range steps {
				if st.resp != "" {
					do(t, ours, "HELLO", st.resp)
					do(t, theirs, "HELLO", st.resp)
					continue
				}
				if got := do(t, ours, st.cmd...); got != st.want72 {
					t.Errorf("%s:%d %q: raftset %q, want 7.2's %q", file, st.line, st.cmd, got, st.want72)
				}
				if got := do(t, theirs, st.cmd...); got != st.want70 {
					t.Errorf("%s:%d %q: redis-server %q, want 7.0's %q", file, st.line, st.cmd, got, st.want70)
				}
			}
		})
	}
}

type goldenStep struct {
	line           int
	resp           string // "resp N" lines
	cmd            []string
	want72, want70 string
}

// readGolden parses a golden file; a step's replies follow its command.
func readGolden(t *testing.T, file string) []goldenStep {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []goldenStep
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		bad := func(why string) { t.Fatalf("%s:%d: %s: %q", file, n, why, line) }
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "resp "):
			steps = append(steps, goldenStep{line: n, resp: strings.TrimPrefix(line, "resp ")})
		case strings.HasPrefix(line, "> "):
			words, ok := goldenWords(line[2:])
			if !ok || len(words) == 0 {
				bad("bad command")
			}
			steps = append(steps, goldenStep{line: n, cmd: words})
		default:
			tag, quoted, _ := strings.Cut(line, " ")
			reply, err := strconv.Unquote(quoted)
			if err != nil || len(steps) == 0 || steps[len(steps)-1].cmd == nil {
				bad("a reply must be Go-quoted and follow a command")
			}
			st := &steps[len(steps)-1]
			switch tag {
			case "=":
				st.want72, st.want70 = reply, reply
			case "7.2":
				st.want72 = reply
			case "7.0":
				st.want70 = reply
			default:
				bad("unknown tag")
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.cmd != nil && (st.want72 == "" || st.want70 == "") {
			t.Fatalf("%s:%d: %q lacks a reply", file, st.line, st.cmd)
		}
	}
	return steps
}

// goldenWords splits a command line into words and Go-quoted strings.
func goldenWords(s string) ([]string, bool) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, false
			}
			w, _ := strconv.Unquote(q)
			out = append(out, w)
			s = s[len(q):]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = rest
	}
	return out, true
}
