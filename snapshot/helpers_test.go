package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"raftset/internal/setenc"
)

// readAll reads a whole file.
func readAll(data []byte, opt ReaderOptions) ([]*Record, *Reader, error) {
	r, err := NewReader(bytes.NewReader(data), opt)
	if err != nil {
		return nil, nil, err
	}
	var recs []*Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, r, nil
		}
		if err != nil {
			return recs, r, err
		}
		recs = append(recs, rec)
	}
}

func sortedMembers(s *setenc.Set) [][]byte {
	m := s.Members()
	slices.SortFunc(m, bytes.Compare)
	return m
}

// entry is a key to write: the fixture form of a Record.
type entry struct {
	db     int
	key    string
	expire int64
	value  []byte      // string when set == nil
	set    *setenc.Set // set
}

// writeEntries writes entries (grouped by db in the order given) and
// returns the file.
func writeEntries(t testing.TB, opt WriterOptions, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opt)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(entries); {
		db := entries[i].db
		j, expires := i, 0
		for ; j < len(entries) && entries[j].db == db; j++ {
			if entries[j].expire >= 0 {
				expires++
			}
		}
		if err := w.SelectDB(db, j-i, expires); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries[i:j] {
			if e.set != nil {
				err = w.WriteSet([]byte(e.key), e.set, e.expire)
			} else {
				err = w.WriteString([]byte(e.key), e.value, e.expire)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		i = j
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// entriesOf turns records back into entries.
func entriesOf(recs []*Record) []entry {
	out := make([]entry, len(recs))
	for i, r := range recs {
		out[i] = entry{db: r.DB, key: string(r.Key), expire: r.ExpireAtMs, value: r.Value, set: r.Set}
	}
	return out
}

// diffRecords compares records with what was written, member order and
// encoding included.
func diffRecords(got []*Record, want []entry) error {
	if len(got) != len(want) {
		return fmt.Errorf("read %d records, wrote %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.DB != w.db || string(g.Key) != w.key || g.ExpireAtMs != w.expire {
			return fmt.Errorf("record %d = db %d key %q expire %d, want db %d key %q expire %d",
				i, g.DB, g.Key, g.ExpireAtMs, w.db, w.key, w.expire)
		}
		if w.set == nil {
			if g.Kind != KindString || !bytes.Equal(g.Value, w.value) {
				return fmt.Errorf("key %q = %v %q, want string %q", w.key, g.Kind, g.Value, w.value)
			}
			continue
		}
		if g.Kind != KindSet {
			return fmt.Errorf("key %q kind = %v, want set", w.key, g.Kind)
		}
		if g.Set.Encoding() != w.set.Encoding() {
			return fmt.Errorf("key %q encoding = %v, want %v", w.key, g.Set.Encoding(), w.set.Encoding())
		}
		if gm, wm := g.Set.Members(), w.set.Members(); !slices.EqualFunc(gm, wm, bytes.Equal) {
			return fmt.Errorf("key %q members = %q, want %q (in order)", w.key, gm, wm)
		}
		if !bytes.Equal(g.Set.Blob(), w.set.Blob()) {
			return fmt.Errorf("key %q blob = %x, want %x", w.key, g.Set.Blob(), w.set.Blob())
		}
	}
	return nil
}

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// newSet builds a set the way SADD does, one batch at a time.
func newSet(batches ...[]string) *setenc.Set {
	lim := setenc.DefaultLimits()
	var s *setenc.Set
	for _, b := range batches {
		ms := make([][]byte, len(b))
		for i, m := range b {
			ms[i] = []byte(m)
		}
		if s == nil {
			s = setenc.NewForAdd(ms[0], len(ms), lim)
		}
		s.AddMany(ms, lim)
	}
	return s
}
