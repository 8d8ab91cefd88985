package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"raftset/internal/setenc"
)

// The seed dataset of the listpack-sets benchmark (docs/benchmarks.md):
// 200,000 sets of 50 members, keys and members 12-digit zero-padded
// decimals, so each set is a 707-byte listpack. Redis 7.2 saves it in 1.03 s
// as an 86.4 MB file and loads it in 0.88 s.
const (
	seedSetCount = 200000
	seedMembers  = 50
)

var seed struct {
	sync.Mutex
	keys [][]byte
	sets []*setenc.Set
	file []byte
}

// seedSets builds the dataset (kept until seedFile drops it).
func seedSets() ([][]byte, []*setenc.Set) {
	seed.Lock()
	defer seed.Unlock()
	if seed.sets == nil {
		lim := setenc.DefaultLimits()
		rng := rand.New(rand.NewPCG(1, 1))
		keys := make([][]byte, seedSetCount)
		sets := make([]*setenc.Set, seedSetCount)
		ms := make([][]byte, seedMembers)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "%012d", i)
			for j := range ms {
				ms[j] = fmt.Appendf(ms[j][:0], "%012d", rng.IntN(200000))
			}
			s := setenc.NewForAdd(ms[0], len(ms), lim)
			s.AddMany(ms, lim)
			sets[i] = s
		}
		seed.keys, seed.sets = keys, sets
	}
	return seed.keys, seed.sets
}

// seedFile returns the dataset's RDB file and lets the sets go, so that the
// read benchmark's heap holds only the file.
func seedFile(b *testing.B) []byte {
	if seed.file == nil {
		keys, sets := seedSets()
		var buf bytes.Buffer
		if err := writeSeed(&buf, keys, sets); err != nil {
			b.Fatal(err)
		}
		seed.file = buf.Bytes()
	}
	seed.keys, seed.sets = nil, nil
	runtime.GC()
	return seed.file
}

func writeSeed(w io.Writer, keys [][]byte, sets []*setenc.Set) error {
	wr, err := NewWriter(w, WriterOptions{Compress: true, Ctime: fixedCtime})
	if err != nil {
		return err
	}
	if err := wr.SelectDB(0, len(keys), 0); err != nil {
		return err
	}
	for i, k := range keys {
		if err := wr.WriteSet(k, sets[i], NoExpiry); err != nil {
			return err
		}
	}
	return wr.Close()
}

// peakHeap samples the heap while fn runs and returns the peak above the
// heap in use when it started (live objects and not-yet-collected garbage).
func peakHeap(fn func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// BenchmarkWriteSeed writes the seed dataset to io.Discard. Metrics:
// file-MB, peak-heap-MB (heap growth during one more write under the
// default GC) and live-peak-MB (the same with GOGC=1, close to what the
// writer really holds).
func BenchmarkWriteSeed(b *testing.B) {
	keys, sets := seedSets()
	cw := &countWriter{}
	if err := writeSeed(cw, keys, sets); err != nil {
		b.Fatal(err)
	}
	write := func() {
		if err := writeSeed(io.Discard, keys, sets); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(cw.n)
	for b.Loop() {
		write()
	}
	b.StopTimer()
	b.ReportMetric(float64(peakHeap(write))/1e6, "peak-heap-MB")
	b.ReportMetric(float64(livePeak(write))/1e6, "live-peak-MB")
	b.ReportMetric(float64(cw.n)/1e6, "file-MB")
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// livePeak is peakHeap with the collector running almost continuously.
func livePeak(fn func()) uint64 {
	old := debug.SetGCPercent(1)
	defer debug.SetGCPercent(old)
	return peakHeap(fn)
}

// BenchmarkReadSeed reads the seed dataset's file from memory, dropping
// each record (the caller's state is not counted). Metrics as for
// BenchmarkWriteSeed.
func BenchmarkReadSeed(b *testing.B) {
	file := seedFile(b)
	b.SetBytes(int64(len(file)))
	read := func() {
		recs := 0
		r, err := NewReader(bytes.NewReader(file), ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			recs++
		}
		if recs != seedSetCount {
			b.Fatalf("read %d records, want %d", recs, seedSetCount)
		}
	}
	for b.Loop() {
		read()
	}
	b.StopTimer()
	b.ReportMetric(float64(peakHeap(read))/1e6, "peak-heap-MB")
	b.ReportMetric(float64(livePeak(read))/1e6, "live-peak-MB")
}

// seedBlob is one listpack of the seed dataset and its LZF form.
func seedBlob() (raw, packed []byte) {
	rng := rand.New(rand.NewPCG(2, 2))
	lim := setenc.DefaultLimits()
	ms := make([][]byte, seedMembers)
	for j := range ms {
		ms[j] = fmt.Appendf(nil, "%012d", rng.IntN(200000))
	}
	s := setenc.NewForAdd(ms[0], len(ms), lim)
	s.AddMany(ms, lim)
	raw = s.Blob()
	var c lzfCompressor
	out := make([]byte, len(raw))
	return raw, out[:c.compress(raw, out[:len(raw)-4])]
}

func BenchmarkLZFCompress(b *testing.B) {
	raw, _ := seedBlob()
	var c lzfCompressor
	out := make([]byte, len(raw))
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		c.compress(raw, out[:len(raw)-4])
	}
}

func BenchmarkLZFDecompress(b *testing.B) {
	raw, packed := seedBlob()
	out := make([]byte, len(raw))
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if err := lzfDecompress(packed, out); err != nil {
			b.Fatal(err)
		}
	}
}
