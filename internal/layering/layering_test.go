package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the layering table in docs/design.md from the rules")

// module is the module path of go.mod; rules name raftset's packages
// relative to it.
const module = "raftset"

// A rule says what one package (or a family, "x/...") may import. Only the
// package's own non-test files count: tests may reach across layers (cluster's
// tests start a resp server), except where testMay says otherwise.
type rule struct {
	pkg string
	// may lists the raftset packages it may import directly. Anything else
	// of raftset is a violation, so a new package needs a rule before it can
	// be used, and a new arrow needs a line here and in the design doc.
	may []string
	// ext lists the third-party packages it may import directly.
	ext []string
	// notStd lists standard-library packages it must not import directly.
	// Direct only: fsm uses hashicorp/raft's interfaces, and raft imports net.
	notStd []string
	// notDeps lists packages it must not reach through any chain of imports.
	notDeps []string
	// testMay, when set, is what the package's tests may import of raftset:
	// for packages that must stay black-box (integration drives the binary).
	testMay []string
}

// pure is what a package whose results must be the same on every replica, or
// that only transforms bytes, keeps away from: no network, no files or
// environment, no logging, no randomness that is not seeded.
var pure = []string{"net", "net/...", "os", "os/...", "syscall", "log", "log/...", "crypto/rand", "math/rand", "crypto/tls", "testing"}

// raftPkgs are the consensus machinery, which only cluster (and fsm, for the
// raft.FSM interface it implements) may see.
var raftPkgs = []string{"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb/...", "go.etcd.io/bbolt"}

// rules is the layering of raftset. docs/design.md shows it as a table and a
// drawing; TestDesignDocTable keeps the table equal to this.
var rules = []rule{
	{pkg: "cmd/...",
		may: []string{"cluster", "resp", "fsm", "snapshot", "internal/setenc", "internal/respwire", "internal/certgen", "internal/tlsconf", "internal/metrics", "internal/memlimit"},
		ext: []string{"github.com/hashicorp/go-hclog"}},
	{pkg: "resp",
		may:     []string{"internal/command", "internal/strictint", "internal/respwire", "internal/glob", "internal/acl", "internal/stats", "internal/peerauth/challenge", "internal/slot"},
		ext:     []string{"github.com/tidwall/redcon", "github.com/hashicorp/go-hclog"},
		notDeps: append([]string{"raftset/cluster", "raftset/fsm", "raftset/snapshot"}, raftPkgs...)},
	{pkg: "cluster",
		may:     []string{"fsm", "snapshot", "internal/command", "internal/setenc", "internal/strictint", "internal/respwire", "internal/peerauth", "internal/peerauth/challenge", "internal/raftmux", "internal/tlsconf", "internal/glob", "internal/acl", "internal/stats", "internal/slot", "internal/memlimit"},
		ext:     []string{"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb/v2", "github.com/hashicorp/raft-wal/...", "go.etcd.io/bbolt", "github.com/hashicorp/go-hclog", "github.com/hashicorp/go-metrics/compat"},
		notDeps: []string{"raftset/resp"}},
	{pkg: "fsm",
		may:     []string{"snapshot", "internal/command", "internal/setenc", "internal/setenc/hashtable", "internal/strictint", "internal/glob", "internal/script", "internal/acl", "internal/alloc", "internal/slot"},
		ext:     []string{"github.com/hashicorp/raft", "github.com/hashicorp/go-hclog"},
		notStd:  pure,
		notDeps: []string{"raftset/cluster", "raftset/resp", "github.com/hashicorp/raft-boltdb/...", "go.etcd.io/bbolt", "github.com/tidwall/redcon"}},
	{pkg: "snapshot",
		may:     []string{"internal/setenc", "internal/setenc/hashtable", "internal/strictint"},
		notStd:  pure,
		notDeps: raftPkgs},
	{pkg: "internal/command",
		may:    []string{"internal/strictint"},
		notStd: pure},
	{pkg: "internal/setenc",
		may:    []string{"internal/setenc/hashtable", "internal/setenc/intset", "internal/setenc/listpack", "internal/strictint", "internal/alloc"},
		notStd: pure},
	{pkg: "internal/setenc/...",
		may:    []string{"internal/strictint", "internal/alloc"},
		notStd: pure},
	{pkg: "internal/strictint", notStd: pure},
	// The Lua interpreter for scripts: it runs inside Apply on every replica,
	// so it keeps the state machine's rules, and knows the keyspace only
	// through the Host the state machine hands it.
	{pkg: "internal/script",
		may:     []string{"internal/command"},
		ext:     []string{"github.com/yuin/gopher-lua", "github.com/yuin/gopher-lua/parse"},
		notStd:  pure,
		notDeps: append([]string{"raftset/fsm", "raftset/cluster", "raftset/resp"}, raftPkgs...)},
	{pkg: "internal/glob", notStd: pure},
	// Redis Cluster's key → hash slot: a pure function, the same on every node.
	{pkg: "internal/slot", notStd: pure},
	{pkg: "internal/alloc", notStd: pure},
	{pkg: "internal/respwire"},
	// The Raft port's gate: it sees raft only as the StreamLayer it implements.
	{pkg: "internal/peerauth",
		may:     []string{"internal/peerauth/challenge", "internal/connq"},
		ext:     []string{"github.com/hashicorp/raft", "github.com/hashicorp/go-hclog"},
		notDeps: []string{"raftset/fsm", "raftset/cluster", "raftset/resp"}},
	// Several Raft groups on one port: it routes authenticated streams by
	// group id and sees raft only as the StreamLayer it splits.
	{pkg: "internal/raftmux",
		may:     []string{"internal/connq"},
		ext:     []string{"github.com/hashicorp/raft"},
		notDeps: []string{"raftset/fsm", "raftset/cluster", "raftset/resp"}},
	// The proof of the shared secret, also run by the front end's
	// RAFTSET.AUTH: pure computation, no transport.
	{pkg: "internal/peerauth/challenge",
		notStd:  []string{"net", "net/...", "os", "os/...", "syscall", "log", "log/..."},
		notDeps: append([]string{"raftset/cluster", "raftset/resp", "raftset/fsm"}, raftPkgs...)},
	{pkg: "internal/tlsconf"},
	// The hand-off of vetted connections to a StreamLayer's Accept.
	{pkg: "internal/connq", notDeps: []string{"raftset/fsm", "raftset/cluster", "raftset/resp"}},
	// ACL users and rules: applied by the state machine on every replica,
	// checked by the front end, so it knows neither.
	{pkg: "internal/acl",
		may:     []string{"internal/command"},
		notStd:  []string{"net", "net/...", "os", "os/...", "syscall", "log", "log/..."},
		notDeps: append([]string{"raftset/cluster", "raftset/resp", "raftset/fsm"}, raftPkgs...)},
	{pkg: "internal/certgen"},
	// The Go runtime's soft memory limit, kept above the live heap: a
	// process-wide setting that the binary starts and the node caps.
	{pkg: "internal/memlimit", notStd: []string{"net", "net/...", "syscall", "log", "log/..."},
		notDeps: append([]string{"raftset/cluster", "raftset/resp", "raftset/fsm"}, raftPkgs...)},
	// Counters shared by the front end and the node: plain data, no I/O.
	{pkg: "internal/stats", notStd: pure},
	// The metrics endpoint: it owns the Prometheus registry and reads the
	// front end and the node through its own interfaces, so it imports
	// neither, and neither imports it.
	{pkg: "internal/metrics",
		may: []string{"internal/stats"},
		ext: []string{"github.com/prometheus/client_golang/prometheus", "github.com/prometheus/client_golang/prometheus/collectors",
			"github.com/prometheus/client_golang/prometheus/promhttp", "github.com/hashicorp/go-metrics/compat"},
		notDeps: append([]string{"raftset/cluster", "raftset/resp", "raftset/fsm"}, raftPkgs...)},
	{pkg: "internal/testutil",
		may: []string{"internal/respwire", "internal/certgen", "internal/tlsconf"},
		ext: []string{"github.com/hashicorp/go-hclog"}},
	{pkg: "internal/layering"},
	// Benchmark tools: they talk to a server over the network only
	// (bench/loadgen through its own epoll loop: golang.org/x/sys/unix).
	{pkg: "bench/...", may: []string{"internal/respwire"}, ext: []string{"github.com/redis/go-redis/v9", "golang.org/x/sys/unix"}},
	{pkg: "integration",
		testMay: []string{"integration/...", "internal/testutil", "internal/respwire"}},
	{pkg: "integration/...",
		may: []string{"integration/..."},
		ext: []string{"github.com/anishathalye/porcupine"}},
}

// pkg is the part of `go list -json` the rules need.
type pkg struct {
	ImportPath   string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

// match reports whether path matches pattern: equal, or under it for "x/...".
func match(pattern, path string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == p || strings.HasPrefix(path, p+"/")
	}
	return pattern == path
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// own returns path relative to the module, and whether it is raftset's.
func own(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// std reports whether path is in the standard library (no dot in its first
// element); call it only on paths own rejected, since "raftset" has no dot.
func std(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// checkImports returns every violation of rules by pkgs, sorted; nil means
// the layering holds.
func checkImports(pkgs []pkg, rules []rule) []string {
	var bad []string
	for _, p := range pkgs {
		rel, ok := own(p.ImportPath)
		if !ok {
			continue
		}
		i := slices.IndexFunc(rules, func(r rule) bool { return match(r.pkg, rel) })
		if i < 0 {
			bad = append(bad, fmt.Sprintf("%s: no layering rule; add one to rules (and the table in docs/design.md)", rel))
			continue
		}
		r := rules[i]
		for _, imp := range p.Imports {
			if to, ok := own(imp); ok {
				switch {
				case match("cmd/...", to):
					bad = append(bad, fmt.Sprintf("%s imports %s: nothing imports a program", rel, to))
				case !matchAny(r.may, to):
					bad = append(bad, fmt.Sprintf("%s imports %s: not allowed by the rule for %s", rel, to, r.pkg))
				}
				continue
			}
			if std(imp) {
				if matchAny(r.notStd, imp) {
					bad = append(bad, fmt.Sprintf("%s imports %s: forbidden by the rule for %s", rel, imp, r.pkg))
				}
			} else if !matchAny(r.ext, imp) {
				bad = append(bad, fmt.Sprintf("%s imports %s: a third-party package not allowed by the rule for %s", rel, imp, r.pkg))
			}
		}
		for _, dep := range p.Deps {
			if matchAny(r.notDeps, dep) {
				bad = append(bad, fmt.Sprintf("%s depends on %s: forbidden even indirectly by the rule for %s", rel, dep, r.pkg))
			}
		}
		if r.testMay != nil {
			for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
				if to, ok := own(imp); ok && to != rel && !matchAny(r.testMay, to) {
					bad = append(bad, fmt.Sprintf("%s's tests import %s: not allowed by the rule for %s", rel, to, r.pkg))
				}
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

// root returns the module's directory: the test runs in internal/layering.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

// goList lists every package of the module with the jepsen tag on, so the
// Jepsen suite's files count too.
func goList(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "jepsen", "-json=ImportPath,Imports,Deps,TestImports,XTestImports", "./...")
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; is the test running inside the module?", len(pkgs))
	}
	return pkgs
}

func TestImports(t *testing.T) {
	for _, v := range checkImports(goList(t), rules) {
		t.Error(v)
	}
}

// TestImportsReportsViolations is the proof that TestImports can fail: a
// package list with forbidden imports, each of which must be reported.
func TestImportsReportsViolations(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: "raftset/resp",
			Imports: []string{"bytes", "github.com/tidwall/redcon", "raftset/internal/command", "raftset/cluster"},
			Deps:    []string{"bytes", "github.com/hashicorp/raft", "github.com/tidwall/redcon", "raftset/cluster", "raftset/internal/command"}},
		{ImportPath: "raftset/fsm",
			Imports: []string{"net", "math/rand", "raftset/snapshot", "github.com/tidwall/redcon"}},
		{ImportPath: "raftset/internal/setenc/listpack",
			Imports: []string{"raftset/internal/alloc", "raftset/fsm", "os"}},
		{ImportPath: "raftset/cluster",
			Imports: []string{"raftset/fsm", "raftset/cmd/raftset"}},
		{ImportPath: "raftset/internal/respwire",
			Imports: []string{"net", "raftset/internal/strictint"}},
		{ImportPath: "raftset/integration",
			TestImports: []string{"raftset/integration/check", "raftset/internal/testutil", "raftset/fsm"}},
		{ImportPath: "raftset/internal/newpkg"},
		{ImportPath: "github.com/tidwall/redcon", Imports: []string{"net"}}, // not ours: no rule needed
	}
	want := []string{
		"cluster imports cmd/raftset: nothing imports a program",
		"fsm imports github.com/tidwall/redcon: a third-party package not allowed by the rule for fsm",
		"fsm imports math/rand: forbidden by the rule for fsm",
		"fsm imports net: forbidden by the rule for fsm",
		"integration's tests import fsm: not allowed by the rule for integration",
		"internal/newpkg: no layering rule; add one to rules (and the table in docs/design.md)",
		"internal/respwire imports internal/strictint: not allowed by the rule for internal/respwire",
		"internal/setenc/listpack imports fsm: not allowed by the rule for internal/setenc/...",
		"internal/setenc/listpack imports os: forbidden by the rule for internal/setenc/...",
		"resp depends on github.com/hashicorp/raft: forbidden even indirectly by the rule for resp",
		"resp depends on raftset/cluster: forbidden even indirectly by the rule for resp",
		"resp imports cluster: not allowed by the rule for resp",
	}
	got := checkImports(pkgs, rules)
	if !slices.Equal(got, want) {
		t.Errorf("checkImports reported\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	// The same packages without the forbidden imports pass.
	clean := []pkg{
		{ImportPath: "raftset/resp", Imports: []string{"bytes", "github.com/tidwall/redcon", "raftset/internal/command"}},
		{ImportPath: "raftset/fsm", Imports: []string{"math/rand/v2", "raftset/snapshot", "github.com/hashicorp/raft"},
			Deps: []string{"net", "github.com/hashicorp/raft"}},
	}
	if got := checkImports(clean, rules); got != nil {
		t.Errorf("checkImports(clean) = %q, want nothing", got)
	}
}

// Markers around the generated table in docs/design.md.
const (
	tableBegin = "<!-- layering table: generated by `go test ./internal/layering -update`; do not edit -->\n"
	tableEnd   = "<!-- end of layering table -->\n"
)

// designTable renders rules as the Markdown table of docs/design.md.
func designTable(rules []rule) string {
	code := func(list []string) string {
		if len(list) == 0 {
			return "—"
		}
		q := make([]string, len(list))
		for i, s := range list {
			q[i] = "`" + s + "`"
		}
		return strings.Join(q, ", ")
	}
	var b strings.Builder
	b.WriteString("| package | may import of raftset | may import from outside the standard library | must not import (standard library) or depend on (through anything) |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, r := range rules {
		var never []string
		for _, d := range r.notDeps {
			if rel, ok := own(d); ok {
				d = rel
			}
			never = append(never, d)
		}
		neverText := code(never)
		switch {
		case slices.Equal(r.notStd, pure) && never == nil:
			neverText = "network, files, environment, logging, unseeded randomness"
		case slices.Equal(r.notStd, pure):
			neverText = "network, files, environment, logging, unseeded randomness; " + neverText
		case r.notStd != nil:
			neverText = code(r.notStd) + "; " + neverText
		}
		may := code(r.may)
		if r.testMay != nil {
			may += "; its tests only " + code(r.testMay)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.pkg, may, code(r.ext), neverText)
	}
	return b.String()
}

// TestDesignDocTable keeps the table in docs/design.md equal to the rules, so
// that the doc cannot promise a layering the test does not check.
func TestDesignDocTable(t *testing.T) {
	path := filepath.Join(root(t), "docs", "design.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), tableBegin)
	table, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no layering table between %q and %q", path, tableBegin, tableEnd)
	}
	want := designTable(rules)
	if table == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(before+tableBegin+want+tableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the layering table in docs/design.md differs from the rules; run go test ./internal/layering -update. Want:\n%s", want)
}
