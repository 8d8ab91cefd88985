package snapshot

import (
	"os"
	"path/filepath"
	"testing"

	"raftset/internal/testutil"
)

// FuzzReader: arbitrary bytes give an error or a file that reads, never a
// panic, a hang or an allocation out of proportion to the input. A file
// that reads must survive a write and a second read unchanged.
func FuzzReader(f *testing.F) {
	for _, path := range testutil.RDBVectors(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 4<<10 {
			// Big inputs add no layouts the small vectors lack, and the fuzzer
			// minimizes every new input found from them: on a busy machine
			// that outlasts a short -fuzztime.
			continue
		}
		f.Add(b)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "golden.rdb"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(rdb(4, false, []byte{TypeString}, str("k"), str("v")))
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := ReaderOptions{SkipUnsupported: len(data)%2 == 0}
		recs, _, err := readAll(data, opt)
		if err != nil {
			return
		}
		out := writeEntries(t, WriterOptions{Compress: true, Ctime: fixedCtime}, entriesOf(recs))
		again, _, err := readAll(out, ReaderOptions{})
		if err != nil {
			t.Fatalf("reading our rewrite of a good file: %v", err)
		}
		if err := diffRecords(again, entriesOf(recs)); err != nil {
			t.Fatalf("rewrite of a good file: %v", err)
		}
	})
}
