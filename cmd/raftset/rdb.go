package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"raftset/snapshot"
)

const rdbUsage = `usage: raftset rdb check [--db N] FILE
       raftset rdb dump  [--db N] FILE

check  verifies the whole file and its checksum, like redis-check-rdb, and
       prints the RDB version, AUX fields and key counts by type and encoding;
       it exits 1 on any problem.
dump   prints one JSON object per key: db, key, type, encoding (after loading),
       members (sorted by bytes) or value, expire_at_ms. Byte strings that are
       not valid UTF-8 are written as {"hex": "..."}.
--db N only reports keys of database N (the whole file is still verified).
`

// runRDB runs `raftset rdb SUBCOMMAND ...` and returns the exit code: 0 for
// a good file, 1 for a bad or unreadable one, 2 for a usage error.
func runRDB(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "check" && args[0] != "dump") {
		fmt.Fprint(stderr, rdbUsage)
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("raftset rdb "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, rdbUsage) }
	db := fs.Int("db", -1, "only keys of database `N`")
	// Flags may come before or after FILE.
	var files []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprint(stderr, rdbUsage)
		return 2
	}
	f, err := os.Open(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "raftset rdb %s: %v\n", sub, err)
		return 1
	}
	defer f.Close()
	if sub == "check" {
		return rdbCheck(f, *db, stdout, stderr)
	}
	return rdbDump(f, *db, stdout, stderr)
}

// rdbCheck reads every record, with records of types raftset does not hold
// stepped over (and counted), as redis-check-rdb parses them.
func rdbCheck(f *os.File, onlyDB int, stdout, stderr io.Writer) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	fail := func(err error) int {
		out.Flush()
		fmt.Fprintf(stderr, "FAIL: %s: %v\n", f.Name(), err)
		return 1
	}
	skipped := map[string]int{}
	r, err := snapshot.NewReader(f, snapshot.ReaderOptions{
		SkipUnsupported: true,
		OnSkip: func(db int, _ []byte, t byte) {
			if onlyDB < 0 || db == onlyDB {
				skipped[snapshot.TypeName(t)]++
			}
		},
	})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(out, "file: %s\nRDB version: %d\n", f.Name(), r.Version())
	auxShown := 0
	showAux := func() {
		for _, a := range r.Aux()[auxShown:] {
			fmt.Fprintf(out, "AUX %s = %s\n", printable(a.Key), printable(a.Value))
		}
		auxShown = len(r.Aux())
	}
	type count struct{ keys, expires int }
	dbs := map[int]*count{}
	byEncoding := map[string]int{}
	byRDBType := map[string]int{}
	expires := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		showAux()
		if err != nil {
			return fail(err)
		}
		if onlyDB >= 0 && rec.DB != onlyDB {
			continue
		}
		c := dbs[rec.DB]
		if c == nil {
			c = &count{}
			dbs[rec.DB] = c
		}
		c.keys++
		if rec.ExpireAtMs != snapshot.NoExpiry {
			c.expires++
			expires++
		}
		byEncoding[rec.Kind.String()+" "+rec.Encoding()]++
		byRDBType[snapshot.TypeName(rec.RDBType)]++
	}
	showAux()
	if r.Exact() {
		fmt.Fprintln(out, "written by raftset: sets restore in their exact encoding and order")
	} else {
		fmt.Fprintln(out, "not a raftset snapshot: sets load with Redis 7.2's encoding conversions")
	}
	total := 0
	for _, db := range slices.Sorted(maps.Keys(dbs)) {
		fmt.Fprintf(out, "db %d: %d keys, %d with expiry\n", db, dbs[db].keys, dbs[db].expires)
		total += dbs[db].keys
	}
	fmt.Fprintln(out, "keys by type and encoding (after loading):")
	for _, k := range slices.Sorted(maps.Keys(byEncoding)) {
		fmt.Fprintf(out, "  %-20s %d\n", k, byEncoding[k])
	}
	fmt.Fprintln(out, "keys by RDB record type:")
	for _, k := range slices.Sorted(maps.Keys(byRDBType)) {
		fmt.Fprintf(out, "  %-20s %d\n", k, byRDBType[k])
	}
	fmt.Fprintf(out, "keys with expiry: %d\n", expires)
	if n := r.EmptySkipped(); n > 0 {
		fmt.Fprintf(out, "empty sets dropped (as Redis does): %d\n", n)
	}
	switch sum := r.Checksum(); {
	case r.Version() < 5:
		fmt.Fprintln(out, "checksum: none (RDB version before 5)")
	case sum == 0:
		fmt.Fprintln(out, "checksum: disabled (0) in the file, not verified")
	default:
		fmt.Fprintf(out, "checksum: OK (%016x)\n", sum)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > r.Offset() {
		return fail(fmt.Errorf("%d bytes after the end of the RDB data at offset %d", fi.Size()-r.Offset(), r.Offset()))
	}
	if len(skipped) > 0 {
		n := 0
		for _, k := range slices.Sorted(maps.Keys(skipped)) {
			fmt.Fprintf(out, "  %-20s %d (raftset does not hold this type)\n", k, skipped[k])
			n += skipped[k]
		}
		fmt.Fprintf(out, "OK: %d keys; %d more of types raftset does not hold, so it would refuse to restore this file\n", total, n)
		return 0
	}
	fmt.Fprintf(out, "OK: %d keys\n", total)
	return 0
}

// rdbDump prints the keys as JSON lines.
func rdbDump(f *os.File, onlyDB int, stdout, stderr io.Writer) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	r, err := snapshot.NewReader(f, snapshot.ReaderOptions{
		SkipUnsupported: true,
		OnSkip: func(db int, key []byte, t byte) {
			if onlyDB < 0 || db == onlyDB {
				fmt.Fprintf(stderr, "skipped key %s in db %d: %s, a type raftset does not hold\n", printable(string(key)), db, snapshot.TypeName(t))
			}
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "FAIL: %s: %v\n", f.Name(), err)
		return 1
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return 0
		}
		if err != nil {
			out.Flush()
			fmt.Fprintf(stderr, "FAIL: %s: %v\n", f.Name(), err)
			return 1
		}
		if onlyDB >= 0 && rec.DB != onlyDB {
			continue
		}
		line := dumpLine{DB: rec.DB, Key: rec.Key, Type: rec.Kind.String(), Encoding: rec.Encoding()}
		if rec.ExpireAtMs != snapshot.NoExpiry {
			line.ExpireAtMs = &rec.ExpireAtMs
		}
		if rec.Kind == snapshot.KindSet {
			ms := rec.Set.Members()
			slices.SortFunc(ms, bytes.Compare)
			line.Members = make([]jsonBytes, len(ms))
			for i, m := range ms {
				line.Members[i] = m
			}
		} else {
			v := jsonBytes(rec.Value)
			line.Value = &v
		}
		if err := enc.Encode(line); err != nil {
			fmt.Fprintf(stderr, "raftset rdb dump: %v\n", err)
			return 1
		}
	}
}

type dumpLine struct {
	DB         int         `json:"db"`
	Key        jsonBytes   `json:"key"`
	Type       string      `json:"type"`
	Encoding   string      `json:"encoding"`
	Members    []jsonBytes `json:"members,omitempty"`
	Value      *jsonBytes  `json:"value,omitempty"`
	ExpireAtMs *int64      `json:"expire_at_ms"`
}

// jsonBytes is a byte string in the test vectors' convention: a JSON string
// when it is valid UTF-8, else {"hex": "<lower-case hex>"}.
type jsonBytes []byte

func (b jsonBytes) MarshalJSON() ([]byte, error) {
	if !utf8.Valid(b) {
		return fmt.Appendf(nil, `{"hex":"%s"}`, hex.EncodeToString(b)), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(b)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// printable quotes s for a terminal when it is not plain text.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7F }) {
		return s
	}
	return fmt.Sprintf("%q", s)
}
