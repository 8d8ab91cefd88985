package fsm

import (
	"fmt"
	"hash/fnv"
	"sync"
	"testing"
	"time"
)

// blockingSink is a snapshot sink whose Write blocks, once, as soon as the
// snapshot has passed its first chunk, until the test lets it go on.
type blockingSink struct {
	memSink
	snap    *fsmSnapshot
	once    sync.Once
	blocked chan struct{}
	resume  chan struct{}
}

func (s *blockingSink) Write(p []byte) (int, error) {
	if s.snap.passed.Load() >= 1 {
		s.once.Do(func() {
			close(s.blocked)
			<-s.resume
		})
	}
	return s.memSink.Write(p)
}

// TestPersistReleasesPassedChunks writes to a keyspace while a snapshot of
// it is half persisted: a chunk the snapshot has written is changed in place
// (no copy made for it), one it has yet to write is copied, and a set that a
// removal moved from an unwritten chunk into a written one is still copied
// before it changes. The file holds exactly the state at capture, and the
// live state is what the same commands give without a snapshot.
func TestPersistReleasesPassedChunks(t *testing.T) {
	const keys = 3*chunkLen - 100
	key := func(i int) string { return fmt.Sprintf("k%05d", i) }
	member := func(i, j int) string {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d", i, j)
		return fmt.Sprintf("%016x", h.Sum64())
	}
	f, ref := newTestFSM(t), newTestFSM(t)
	both := func(args ...string) {
		t.Helper()
		if got, want := applyCmd(t, f, 1000, args...), applyCmd(t, ref, 1000, args...); got != want {
			t.Fatalf("%q = %q, want %q (no snapshot)", args, got, want)
		}
	}
	for i := range keys {
		args := []string{"sadd", key(i)}
		for j := range 16 {
			args = append(args, member(i, j))
		}
		both(args...)
	}
	atCapture := dump(f)

	rs, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap := rs.(*fsmSnapshot)
	sink := &blockingSink{snap: snap, blocked: make(chan struct{}), resume: make(chan struct{})}
	persisted := make(chan error, 1)
	go func() { persisted <- snap.Persist(sink) }()
	select {
	case <-sink.blocked:
	case err := <-persisted:
		t.Fatalf("Persist returned (%v) without writing past the first chunk", err)
	case <-time.After(time.Minute):
		t.Fatal("the snapshot did not write past its first chunk within a minute")
	}
	passed := snap.passed.Load()
	if passed < 1 || passed >= 3 {
		t.Fatalf("blocked with %d of 3 chunks passed; the test needs 1 or 2", passed)
	}
	if snap.chunks[0] != nil {
		t.Errorf("the snapshot still holds chunk 0 after writing it")
	}

	chunk := func(ci int) *chunk {
		f.mu.RLock()
		defer f.mu.RUnlock()
		return f.ks.chunks[ci]
	}
	c0, c2 := chunk(0), chunk(2)
	both("srem", key(10), member(10, 3)) // chunk 0: passed
	if chunk(0) != c0 {
		t.Errorf("a write to chunk 0, which the snapshot has written, copied the chunk")
	}
	both("srem", key(2*chunkLen+5), member(2*chunkLen+5, 3)) // chunk 2: not yet written
	if chunk(2) == c2 {
		t.Errorf("a write to chunk 2, which the snapshot has yet to write, did not copy the chunk")
	}
	// The last key moves from chunk 2 into the hole at position 20 (chunk 0),
	// then shrinks in place: the snapshot must still read it as captured.
	both("del", key(20))
	both("srem", key(keys-1), member(keys-1, 0))
	both("sadd", key(keys-1), "new")
	both("srem", key(30), member(30, 0))

	close(sink.resume)
	if err := <-persisted; err != nil {
		t.Fatalf("Persist: %v", err)
	}
	snap.Release()
	if got := dump(restored(t, sink.Bytes())); got != atCapture {
		t.Fatalf("the snapshot differs from the state at capture:\n%s", diffLines(got, atCapture))
	}
	if got, want := dump(f), dump(ref); got != want {
		t.Fatalf("the state written during the snapshot differs from the same commands without one:\n%s", diffLines(got, want))
	}
	if err := snap.Persist(&memSink{}); err == nil {
		t.Errorf("a second Persist of the same snapshot succeeded; it has dropped its chunks")
	}
}
