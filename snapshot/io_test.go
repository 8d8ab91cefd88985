package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"raftset/internal/setenc"
	"raftset/internal/testutil"
)

// TestReaderSources reads through readers that return little data per call,
// or data together with io.EOF: the records must not change.
func TestReaderSources(t *testing.T) {
	files := [][]byte{}
	for _, p := range testutil.RDBVectors(t) {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
			files = append(files, b)
		}
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "golden.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, golden)
	for i, data := range files {
		want, _, err := readAll(data, ReaderOptions{ForceExact: true})
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		for name, wrap := range map[string]func([]byte) *Reader{
			"OneByte": func(b []byte) *Reader { return mustReader(t, iotest.OneByteReader(bytes.NewReader(b))) },
			"Half":    func(b []byte) *Reader { return mustReader(t, iotest.HalfReader(bytes.NewReader(b))) },
			"DataErr": func(b []byte) *Reader { return mustReader(t, iotest.DataErrReader(bytes.NewReader(b))) },
		} {
			r := wrap(data)
			var got []*Record
			for {
				rec, err := r.Next()
				if err != nil {
					if err != io.EOF {
						t.Fatalf("file %d via %s: %v", i, name, err)
					}
					break
				}
				got = append(got, rec)
			}
			if err := diffRecords(got, entriesOf(want)); err != nil {
				t.Errorf("file %d via %s: %v", i, name, err)
			}
		}
	}
}

func mustReader(t *testing.T, r io.Reader) *Reader {
	t.Helper()
	rd, err := NewReader(r, ReaderOptions{ForceExact: true})
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// failWriter fails once it has taken n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errDisk
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriterErrors(t *testing.T) {
	if _, err := NewWriter(&bytes.Buffer{}, WriterOptions{Version: 12}); err == nil {
		t.Errorf("NewWriter(Version 12) succeeded, want an error")
	}
	if _, err := NewWriter(&bytes.Buffer{}, WriterOptions{Aux: []AuxField{{"ctime", "1"}}}); err == nil {
		t.Errorf("NewWriter with a caller ctime AUX succeeded, want an error")
	}
	w, err := NewWriter(&bytes.Buffer{}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSet([]byte("k"), setenc.NewForAdd([]byte("a"), 1, setenc.DefaultLimits()), NoExpiry); err == nil {
		t.Errorf("WriteSet(empty set) succeeded, want an error")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteString([]byte("k"), []byte("v"), NoExpiry); err == nil {
		t.Errorf("WriteString after Close succeeded, want an error")
	}

	// A failing destination: the error surfaces (at the latest from Close)
	// and sticks.
	big := bytes.Repeat([]byte{'x'}, 100<<10)
	fw := &failWriter{n: 1000}
	w, err = NewWriter(fw, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.SelectDB(0, 1, 0)
	err1 := w.WriteString([]byte("k"), big, NoExpiry)
	err2 := w.Close()
	if !errors.Is(err1, errDisk) && !errors.Is(err2, errDisk) {
		t.Errorf("WriteString, Close = %v, %v; want errDisk", err1, err2)
	}
	if err := w.Close(); err == nil {
		t.Errorf("second Close succeeded after a write error")
	}
}
