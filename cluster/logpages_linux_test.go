package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// mappingRss reads the resident kilobytes of the mapping starting at addr
// from /proc/self/smaps.
func mappingRss(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, _, ok := strings.Cut(strings.Fields(line)[0], "-"); ok && !strings.HasSuffix(line, ":") && len(strings.Fields(line)) >= 5 {
			in = lo == fmt.Sprintf("%x", addr)
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); in && ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	t.Fatalf("mapping at %x not found", addr)
	return 0
}

func TestReleaseFilePages(t *testing.T) {
	path := filepath.Join(t.TempDir(), raftDBFile)
	const size = 4 << 20
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// As bbolt maps it: shared, read-only.
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	var sum byte
	for i := 0; i < size; i += 4096 {
		sum += m[i]
	}
	addr := uintptr(unsafe.Pointer(&m[0]))
	if rss := mappingRss(t, addr); rss < size/1024/2 {
		t.Fatalf("touched mapping has only %d kB resident", rss)
	}
	n, err := releaseFilePages(path)
	if err != nil {
		t.Skipf("MADV_PAGEOUT unavailable: %v", err)
	}
	if n != size {
		t.Fatalf("released %d bytes of mappings, want %d", n, size)
	}
	if rss := mappingRss(t, addr); rss > size/1024/4 {
		t.Fatalf("after release %d kB of the mapping are resident", rss)
	}
	for i := 0; i < size; i += 4096 { // still readable: the file's contents
		sum += m[i]
	}
	if sum != 0 {
		t.Fatalf("mapping reads %d, want zeros", sum)
	}
}
