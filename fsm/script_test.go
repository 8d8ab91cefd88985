package fsm

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/*.txt (commit only diffs you understand)")

// TestScripts runs the command scripts in testdata/*.txt. A script is a
// list of steps; each command step is followed by its expected reply, as
// redis-cli would print it:
//
//	# a comment
//	now 1000                 the clock for the following steps (ms)
//	> sadd k a b             a command the way the cluster runs it: a write
//	(integer) 2              goes through Prepare then Apply, a read to Read
//	apply> expire k 10       a command applied exactly as written (no Prepare)
//	(integer) 1
//	restore                  persist a snapshot and continue on an FSM restored from it
//	dump                     print the keyspace (then its expected text)
//
// Blank lines separate steps. With -update the expected text is rewritten
// from what the FSM answers.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScript(t, file)
		})
	}
}

func runScript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f := newTestFSM(t)
	now := int64(1_000_000)
	var out bytes.Buffer
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line + "\n")
		var got string
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "now "):
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "now "), 10, 64)
			if err != nil {
				t.Fatalf("%s:%d: %v", file, i+1, err)
			}
			now = n
			continue
		case line == "restore":
			f = restored(t, persist(t, f))
			continue
		case line == "dump":
			got = strings.TrimRight(dump(f), "\n")
		case strings.HasPrefix(line, "> "):
			got = pretty(doCmd(t, f, now, splitArgs(t, line[2:])...))
		case strings.HasPrefix(line, "apply> "):
			got = pretty(applyCmd(t, f, now, splitArgs(t, line[7:])...))
		default:
			t.Fatalf("%s:%d: unknown step %q", file, i+1, line)
		}
		// The expected text runs to the next blank line.
		j := i + 1
		for j < len(lines) && lines[j] != "" {
			j++
		}
		want := strings.Join(lines[i+1:j], "\n")
		if got != want && !*update {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, i+1, line, got, want)
		}
		out.WriteString(got + "\n")
		i = j - 1
	}
	if *update {
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// splitArgs splits a command line on spaces; an argument in double quotes
// is a Go string literal (for spaces, empty strings and escapes).
func splitArgs(t *testing.T, s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				t.Fatalf("bad quoted argument in %q: %v", s, err)
			}
			a, _ := strconv.Unquote(q)
			out = append(out, a)
			s = s[len(q):]
			continue
		}
		a, rest, _ := strings.Cut(s, " ")
		out = append(out, a)
		s = rest
	}
	return out
}
