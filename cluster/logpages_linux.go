package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// bbolt reads raft.db through a shared read-only mapping, and every page
// it touched stays resident and counts in the process's RSS: compacting the
// log walks every deleted entry, so after a write burst the whole file
// (50 MB with the default retention) stayed mapped in, next to a keyspace
// of 20 MB. Those pages are clean copies of the file that the node will
// seldom read again (only a follower far behind needs old entries), so when
// the log goes quiet the node asks the kernel to reclaim them.
//
// MADV_PAGEOUT, not MADV_DONTNEED: the range comes from /proc/self/maps and
// bbolt may remap the file meanwhile; if the old range were reused for the
// Go heap, DONTNEED would zero live memory, while PAGEOUT never changes
// what memory holds (anonymous pages it cannot reclaim without swap stay).

const madvPageout = 21 // MADV_PAGEOUT, Linux 5.4

// releaseFilePages asks the kernel to reclaim the pages of path's mappings
// in this process, and returns how many bytes of mappings it asked about.
func releaseFilePages(path string) (int64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("cluster: stat %s: %w", path, err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("cluster: read mappings: %w", err)
	}
	defer f.Close()
	type span struct{ lo, hi uintptr }
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 7f0c2a000000-7f0c2d200000 r--s 00000000 fd:01 1234567 /dir/raft.db
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[4] != strconv.FormatUint(st.Ino, 10) ||
			!strings.HasSuffix(fields[len(fields)-1], "/"+filepath.Base(path)) {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && h > l {
			spans = append(spans, span{uintptr(l), uintptr(h)})
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cluster: read mappings: %w", err)
	}
	var total int64
	for _, s := range spans {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, s.lo, s.hi-s.lo, madvPageout); e != 0 {
			return total, fmt.Errorf("cluster: madvise %s: %w", path, e)
		}
		total += int64(s.hi - s.lo)
	}
	return total, nil
}
