package layering

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// deterministic are the directories (relative to the module, "x/..." for a
// tree) whose non-test code must give the same result on every replica: the
// state machine, the snapshot format it writes, and the set encodings whose
// bytes and member order are part of the state.
var deterministic = []string{"fsm", "snapshot", "internal/setenc/...", "internal/script"}

// banned maps an import path to the members of it that read the wall clock,
// a global random source or the environment; "*" bans the whole package.
// math/rand/v2's constructors stay allowed: a generator seeded from the log
// entry is how the state machine draws its random picks.
var banned = map[string][]string{
	"time":         {"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"},
	"math/rand":    {"*"},
	"crypto/rand":  {"*"},
	"math/rand/v2": {"*", "-New", "-NewPCG", "-NewChaCha8", "-NewZipf", "-Rand", "-Source", "-PCG", "-ChaCha8", "-Zipf"},
	"hash/maphash": {"MakeSeed"},
	"os":           {"Getenv", "LookupEnv", "Environ", "Hostname", "Getpid"},
}

// allowed are the uses of banned members that are reviewed, keyed by
// "file: pkg.Member" (file relative to the module), with the reason. Adding
// one is a design decision: write down why no replica can observe it.
var allowed = map[string]string{
	// The index spreads members over slots with a per-process seed; the order
	// callers see (the dense array) does not depend on it.
	"internal/setenc/hashtable/table.go: maphash.MakeSeed": "slot placement only",
	// Duplicate detection while validating a foreign listpack; it decides
	// only accept or refuse, the same on every node.
	"internal/setenc/listpack/validate.go: maphash.MakeSeed": "duplicate check only",
	// The ctime AUX field when a caller gives none; the state machine always
	// gives its own clock (fsm/snapshot.go), so its snapshots never read it.
	"snapshot/writer.go: time.Now": "ctime default for callers outside the state machine",
}

// isBanned reports whether member of the package at path is banned.
func isBanned(path, member string) bool {
	list, ok := banned[path]
	if !ok || slices.Contains(list, "-"+member) {
		return false
	}
	return slices.Contains(list, "*") || slices.Contains(list, member)
}

// checkSource returns the banned uses in one file's source; name is the
// file's path relative to the module, as allowed keys it.
func checkSource(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	var bad []string
	local := map[string]string{} // the name a file uses for an import -> its path
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: import %s: %w", name, imp.Path.Value, err)
		}
		n := path[strings.LastIndex(path, "/")+1:]
		if path == "math/rand/v2" {
			n = "rand"
		}
		if imp.Name != nil {
			n = imp.Name.Name
		}
		list, ok := banned[path]
		whole := slices.Contains(list, "*") && !slices.ContainsFunc(list, func(m string) bool { return strings.HasPrefix(m, "-") })
		if ok && (whole || n == ".") {
			// A dot import hides the uses, so it is out like a banned package.
			bad = append(bad, fmt.Sprintf("%s: imports %s", fset.Position(imp.Pos()), path))
			continue
		}
		local[n] = path
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok {
				return true
			}
			path, ok := local[id.Name]
			if !ok || !isBanned(path, n.Sel.Name) {
				return true
			}
			key := name + ": " + id.Name + "." + n.Sel.Name
			if _, ok := allowed[key]; !ok {
				bad = append(bad, fmt.Sprintf("%s: uses %s.%s", fset.Position(n.Pos()), path, n.Sel.Name))
			}
		case *ast.CallExpr:
			// A decode failure in Apply panics with an error that wraps its
			// cause (fmt.Errorf), so what stopped the node stays inspectable.
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "panic" && len(n.Args) == 1 && strings.HasPrefix(name, "fsm/") {
				if c, ok := n.Args[0].(*ast.CallExpr); ok {
					if s, ok := c.Fun.(*ast.SelectorExpr); ok && local[identName(s.X)] == "fmt" && s.Sel.Name == "Sprintf" {
						bad = append(bad, fmt.Sprintf("%s: panic(fmt.Sprintf(...)); panic with fmt.Errorf", fset.Position(n.Pos())))
					}
				}
			}
		}
		return true
	})
	return bad, nil
}

func identName(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// sourceFiles returns the non-test Go files under the deterministic
// directories, relative to the module root.
func sourceFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, d := range deterministic {
		dir, tree := strings.CutSuffix(d, "/...")
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if name := e.Name(); path != filepath.Join(root, dir) && (!tree || name == "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestDeterminism keeps the wall clock, global randomness and the
// environment out of the code whose results every replica must reproduce.
func TestDeterminism(t *testing.T) {
	r := root(t)
	files := sourceFiles(t, r)
	if len(files) < 20 {
		t.Fatalf("found only %d files under %v", len(files), deterministic)
	}
	used := map[string]bool{}
	for _, name := range files {
		src, err := os.ReadFile(filepath.Join(r, name))
		if err != nil {
			t.Fatal(err)
		}
		bad, err := checkSource(name, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Error(b)
		}
		for key := range allowed {
			if strings.HasPrefix(key, name+": ") && strings.Contains(string(src), strings.TrimPrefix(key, name+": ")) {
				used[key] = true
			}
		}
	}
	for key := range allowed {
		if !used[key] {
			t.Errorf("allowed %q is no longer used: remove it", key)
		}
	}
}

// TestDeterminismReportsViolations is the proof that TestDeterminism can
// fail: sources with banned calls, each of which must be reported.
func TestDeterminismReportsViolations(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // substrings, one per expected report
	}{
		{"fsm/x.go", `package fsm
import ("time"; "math/rand/v2"; "fmt")
func f() int64 { _ = time.Since(time.Time{}); panic(fmt.Sprintf("x %d", 1)); return time.Now().Unix() + int64(rand.IntN(3)) }`,
			[]string{"uses time.Since", "panic(fmt.Sprintf", "uses time.Now", "uses math/rand/v2.IntN"}},
		{"snapshot/x.go", `package snapshot
import (clock "time"; "os")
func f() (clock.Time, string) { return clock.Now(), os.Getenv("X") }`,
			[]string{"uses time.Now", "uses os.Getenv"}},
		{"internal/setenc/x.go", `package setenc
import ("crypto/rand"; mr "math/rand"; "hash/maphash")
var s = maphash.MakeSeed()
func f(b []byte) int { rand.Read(b); return mr.Int() }`,
			[]string{"imports crypto/rand", "imports math/rand", "uses hash/maphash.MakeSeed"}},
		{"internal/setenc/y.go", `package setenc
import . "math/rand/v2"
func f() int { return IntN(3) }`,
			[]string{"imports math/rand/v2"}},
	} {
		got, err := checkSource(tc.name, []byte(tc.src))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %d reports %q, want %d", tc.name, len(got), got, len(tc.want))
			continue
		}
		for _, w := range tc.want {
			if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
				t.Errorf("%s: no report containing %q in %q", tc.name, w, got)
			}
		}
	}
	// Seeded generators, a timestamp conversion and the reviewed uses pass.
	ok := `package fsm
import ("math/rand/v2"; "time")
func f(seed uint64, ms int64) (*rand.Rand, time.Time) { return rand.New(rand.NewPCG(seed, 1)), time.UnixMilli(ms) }`
	if got, err := checkSource("fsm/ok.go", []byte(ok)); err != nil || got != nil {
		t.Errorf("clean source: %q, %v", got, err)
	}
}
