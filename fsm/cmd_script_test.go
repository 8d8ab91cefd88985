package fsm

import (
	"sync"
	"testing"
)

// TestScriptReadsInParallel: read-only scripts run concurrently on pooled
// interpreters sharing one compiled script, while Apply runs scripts too
// (go test -race checks that nothing is shared unsafely).
func TestScriptReadsInParallel(t *testing.T) {
	f := newTestFSM(t)
	doCmd(t, f, 1000, "sadd", "s", "a", "b", "c")
	const ro = "local n = 0 for _, m in ipairs(redis.call('smembers', KEYS[1])) do n = n + #m end return {n, tostring({}), math.random(10)}"
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if got := doCmd(t, f, 1000, "eval_ro", ro, "1", "s"); got[:10] != "*3\r\n:3\r\n$1" {
					t.Errorf("reader %d, run %d: %q", g, i, got)
					return
				}
			}
		}()
	}
	for i := range 50 {
		doCmd(t, f, 1000, "eval", "return redis.call('sadd', KEYS[1], ARGV[1])", "1", "w", string(rune('a'+i%26)))
	}
	wg.Wait()
}
