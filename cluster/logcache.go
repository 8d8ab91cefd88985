package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// logCache keeps recent log entries in memory, like raft.LogCache, but
// bounded by bytes as well as entries, and emptied once the log goes quiet.
//
// A group-commit entry holds anything from one command to thousands: with
// raft.LogCache's 256 entries, 200,000 SETs of 32-byte values at -P 50 -c 50
// left 256 entries of about 150 KB each in the heap after the load, more
// than the keyspace itself. The cache only saves disk reads while entries
// are being replicated and applied (a follower applies what it just stored;
// the leader sends what it just stored), so a few megabytes of the newest
// entries serve it, and an idle node needs none.
//
// The cache stores a copy of each raft.Log header: on the leader, the
// *raft.Log handed to StoreLogs lives inside Raft's apply future, and
// keeping that pointer would keep the whole future (and the entry's
// replies) alive.
type logCache struct {
	raft.LogStore
	maxBytes int

	mu    sync.Mutex
	ring  []*raft.Log
	bytes int
	lo    uint64 // no cached entry is below lo
	last  time.Time
}

func newLogCache(store raft.LogStore, entries, maxBytes int) (*logCache, error) {
	if entries <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("cluster: log cache of %d entries, %d bytes", entries, maxBytes)
	}
	return &logCache{LogStore: store, maxBytes: maxBytes, ring: make([]*raft.Log, entries)}, nil
}

func logSize(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + 64 }

func (c *logCache) GetLog(idx uint64, out *raft.Log) error {
	c.mu.Lock()
	if l := c.ring[idx%uint64(len(c.ring))]; l != nil && l.Index == idx {
		*out = *l
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.LogStore.GetLog(idx, out)
}

func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.LogStore.StoreLogs(logs); err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %q", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = time.Now()
	n := uint64(len(c.ring))
	for _, l := range logs {
		if c.bytes == 0 || l.Index < c.lo {
			c.lo = l.Index
		}
		slot := &c.ring[l.Index%n]
		if old := *slot; old != nil {
			c.bytes -= logSize(old)
		}
		cp := *l
		*slot = &cp
		c.bytes += logSize(&cp)
		if l.Index >= n && l.Index-n+1 > c.lo {
			c.lo = l.Index - n + 1
		}
	}
	if len(logs) > 0 {
		c.evict(logs[len(logs)-1].Index)
	}
	return nil
}

// evict drops the oldest entries until the cache fits maxBytes, always
// keeping the newest (top).
func (c *logCache) evict(top uint64) {
	n := uint64(len(c.ring))
	for c.bytes > c.maxBytes && c.lo < top {
		slot := &c.ring[c.lo%n]
		if l := *slot; l != nil && l.Index == c.lo {
			c.bytes -= logSize(l)
			*slot = nil
		}
		c.lo++
	}
}

func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	c.clearLocked()
	c.mu.Unlock()
	return c.LogStore.DeleteRange(min, max)
}

// dropIfIdle empties the cache when nothing was stored for idle: the
// entries it holds were applied and replicated long ago, or a follower
// that is behind reads them from disk. It reports whether it emptied it.
func (c *logCache) dropIfIdle(idle time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes > 0 && time.Since(c.last) >= idle {
		c.clearLocked()
		return true
	}
	return false
}

func (c *logCache) clearLocked() {
	clear(c.ring)
	c.bytes, c.lo = 0, 0
}

// IsMonotonic passes on the store's raft.MonotonicLogStore (raft-wal refuses
// a gap in indexes; the embedded interface would hide the method).
func (c *logCache) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
