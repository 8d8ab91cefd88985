package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// countingStore is an in-memory log store that counts reads, so a test can
// tell a cache hit from a miss.
type countingStore struct {
	*raft.InmemStore
	reads int
}

func (s *countingStore) GetLog(idx uint64, l *raft.Log) error {
	s.reads++
	return s.InmemStore.GetLog(idx, l)
}

func entry(i uint64, size int) *raft.Log {
	return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)}
}

func TestLogCacheBoundedByBytes(t *testing.T) {
	store := &countingStore{InmemStore: raft.NewInmemStore()}
	c, err := newLogCache(store, 16, 3*(1000+64))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 10; i++ {
		if err := c.StoreLogs([]*raft.Log{entry(i, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	if c.bytes > c.maxBytes {
		t.Fatalf("cache holds %d bytes, bound %d", c.bytes, c.maxBytes)
	}
	var l raft.Log
	for i := uint64(8); i <= 10; i++ { // the newest three are cached
		if err := c.GetLog(i, &l); err != nil || l.Index != i || len(l.Data) != 1000 || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d) = %+v, %v", i, l, err)
		}
	}
	if store.reads != 0 {
		t.Fatalf("the newest entries were read from the store %d times", store.reads)
	}
	if err := c.GetLog(3, &l); err != nil || l.Index != 3 || l.Data[0] != 3 { // evicted: from the store
		t.Fatalf("GetLog(3) = %+v, %v", l, err)
	}
	if store.reads != 1 {
		t.Fatalf("an evicted entry was not read from the store (reads %d)", store.reads)
	}

	// One entry bigger than the bound stays: the newest is always kept.
	if err := c.StoreLogs([]*raft.Log{entry(11, 10000)}); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(11, &l); err != nil || len(l.Data) != 10000 || store.reads != 1 {
		t.Fatalf("GetLog(11) = %d bytes, %v, reads %d", len(l.Data), err, store.reads)
	}
	if err := c.GetLog(10, &l); err != nil || store.reads != 2 {
		t.Fatalf("entry 10 still cached next to an oversized newest entry (reads %d, err %v)", store.reads, err)
	}
}

func TestLogCacheCopiesHeaderAndTruncates(t *testing.T) {
	store := &countingStore{InmemStore: raft.NewInmemStore()}
	c, err := newLogCache(store, 4, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	in := entry(1, 10)
	if err := c.StoreLogs([]*raft.Log{in, entry(2, 10)}); err != nil {
		t.Fatal(err)
	}
	if c.ring[1] == in {
		t.Fatal("the cache keeps the caller's *raft.Log (on the leader it pins Raft's apply future)")
	}
	// The ring wraps: entries 3..6 evict 1 and 2 by slot.
	for i := uint64(3); i <= 6; i++ {
		if err := c.StoreLog(entry(i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	var l raft.Log
	if err := c.GetLog(2, &l); err != nil || l.Index != 2 || store.reads != 1 {
		t.Fatalf("GetLog(2) after wrap: %+v, %v, reads %d", l, err, store.reads)
	}
	if c.bytes != 4*(10+64) {
		t.Fatalf("cache accounts %d bytes for 4 entries of 10", c.bytes)
	}
	// A follower's truncation: DeleteRange empties the cache, later stores
	// at lower indexes are served from it again.
	if err := c.DeleteRange(5, 6); err != nil {
		t.Fatal(err)
	}
	if c.bytes != 0 {
		t.Fatalf("cache holds %d bytes after DeleteRange", c.bytes)
	}
	repl := entry(5, 20)
	repl.Term = 2
	if err := c.StoreLog(repl); err != nil {
		t.Fatal(err)
	}
	reads := store.reads
	if err := c.GetLog(5, &l); err != nil || l.Term != 2 || len(l.Data) != 20 || store.reads != reads {
		t.Fatalf("GetLog(5) after truncation: %+v, %v", l, err)
	}
	if err := c.GetLog(6, &l); err == nil {
		t.Fatal("GetLog(6) found a deleted entry")
	}
}

func TestLogCacheDropsWhenIdle(t *testing.T) {
	c, err := newLogCache(raft.NewInmemStore(), 8, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if c.dropIfIdle(0) {
		t.Fatal("an empty cache reported a drop")
	}
	if err := c.StoreLog(entry(1, 100)); err != nil {
		t.Fatal(err)
	}
	if c.dropIfIdle(time.Hour) {
		t.Fatal("dropped a cache that was written just now")
	}
	c.mu.Lock()
	c.last = time.Now().Add(-time.Minute)
	c.mu.Unlock()
	if !c.dropIfIdle(time.Second) || c.bytes != 0 || c.ring[1] != nil {
		t.Fatalf("idle cache not emptied: %d bytes", c.bytes)
	}
	var l raft.Log
	if err := c.GetLog(1, &l); err != nil || l.Index != 1 {
		t.Fatalf("GetLog(1) after the drop: %+v, %v", l, err)
	}
}
