package cluster

import (
	"runtime"
	"testing"
)

// TestHeapAllocMatchesMemStats: the metrics' heap and dataset figures,
// read without stopping the world, are MemStats.HeapAlloc.
func TestHeapAllocMatchesMemStats(t *testing.T) {
	keep := make([][]byte, 0, 1024)
	for range 1024 {
		keep = append(keep, make([]byte, 4096)) // 4 MB the two reads must both see
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	got := heapAlloc()
	runtime.KeepAlive(keep)
	if lo, hi := ms.HeapAlloc*9/10, ms.HeapAlloc*11/10; got < lo || got > hi || got < 4<<20 {
		t.Errorf("heapAlloc() = %d, MemStats.HeapAlloc = %d", got, ms.HeapAlloc)
	}
}
