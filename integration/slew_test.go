//go:build jepsen

package integration

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The TTL rows' offsets show in a history only while cluster time slews:
// while the leader's wall clock differs from cluster time, TTLs last up to
// 5% longer or shorter (cluster/DESIGN.md, "Cluster time"); a leader whose
// clock is cluster time shows nothing, and assuming exact clocks the TTL
// checker then says Ok. slewWatch measures how long the slew lasted, and
// the keeper moves leadership off a node whose clock is cluster time, so
// that a row can require a minimum of slew instead of hoping for it.

const (
	// slewSamplePeriod: how often the watch reads INFO raft on every node.
	slewSamplePeriod = 250 * time.Millisecond
	// slewMinRate: an interval counts as slewing when the leader's offset
	// moved at least this many ms per second of it; the slew moves it by
	// 50 ms a second (clockSlewDiv), a converged leader's by none (the
	// offset is truncated to ms, which adds at most 1 ms either way).
	slewMinRate = 20
	// anchorSlack: a leader whose offset is at most this has (almost) no
	// slew left: cluster time is its wall clock within 1 s of slewing.
	anchorSlack = 50 * time.Millisecond
	// keepMinSkew: the keeper transfers only to a node whose clock is at
	// least this far from cluster time (10 s of slew).
	keepMinSkew = 500 * time.Millisecond
	// keepRetryAfter: the keeper's pause after a refused transfer.
	keepRetryAfter = time.Second
)

// clockSample is the leader's view of the cluster clock at one moment.
type clockSample struct {
	At     time.Time
	Leader string
	Term   uint64
	// Offset is the leader's raft_cluster_clock_offset_ms: cluster time
	// minus its (skewed) wall clock.
	Offset time.Duration
}

// slewStats is what the watch measured over a run (result.json "slew").
type slewStats struct {
	// Samples counts the samples that found a leader.
	Samples int `json:"samples"`
	// Slewing is the time the leader's offset changed at slewing speed
	// (between two samples of the same leader and term); SlewedMs how far
	// cluster time moved meanwhile against real time (about 50 ms for
	// every second of Slewing).
	Slewing  time.Duration `json:"slewing_ns"`
	SlewedMs int64         `json:"slewed_ms"`
	// Led: per node, the time it was seen leading (same two bounds);
	// SlewingBy the part of it that slewed.
	Led       map[string]time.Duration `json:"led_ns"`
	SlewingBy map[string]time.Duration `json:"slewing_by_leader_ns"`
	// KeeperTransfers counts the keeper's transfers away from a leader
	// whose clock was cluster time; KeeperErrors the ones refused.
	KeeperTransfers int      `json:"keeper_transfers,omitempty"`
	KeeperErrors    []string `json:"keeper_errors,omitempty"`
}

func (s slewStats) String() string {
	var led []string
	for _, id := range slices.Sorted(maps.Keys(s.Led)) {
		led = append(led, fmt.Sprintf("%s %.1f s (%.1f s slewing)", id, s.Led[id].Seconds(), s.SlewingBy[id].Seconds()))
	}
	return fmt.Sprintf("cluster time slewed for %.1f s (%d ms) over %d samples; led: %s; %d keeper transfers (%d refused)",
		s.Slewing.Seconds(), s.SlewedMs, s.Samples, strings.Join(led, ", "), s.KeeperTransfers, len(s.KeeperErrors))
}

// slewWatch samples the leader's cluster clock offset every
// slewSamplePeriod and adds up the slew.
type slewWatch struct {
	cl      Cluster
	offsets map[string]time.Duration // the nodes' clock offsets (absent: 0)

	mu     sync.Mutex
	last   clockSample // the newest sample that found a leader
	stats  slewStats
	sample bool // last is set
}

func newSlewWatch(cl Cluster, offsets map[string]time.Duration) *slewWatch {
	return &slewWatch{cl: cl, offsets: offsets,
		stats: slewStats{Led: map[string]time.Duration{}, SlewingBy: map[string]time.Duration{}}}
}

// run samples until ctx is done.
func (w *slewWatch) run(ctx context.Context) {
	t := time.NewTicker(slewSamplePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s, ok := w.read(); ok {
			w.add(s)
		}
	}
}

// read asks every running, unpaused node for INFO raft at once and
// returns the leader's reading (of the highest term, should a deposed
// leader not know yet).
func (w *slewWatch) read() (clockSample, bool) {
	nodes := w.cl.Nodes()
	got := make([]clockSample, len(nodes))
	var wg sync.WaitGroup
	for i, id := range nodes {
		if !w.cl.Running(id) || w.cl.Paused(id) {
			continue
		}
		wg.Go(func() {
			f, err := infoFields(w.cl.Addr(id), 300*time.Millisecond, "raft")
			if err != nil || f["raft_state"] != "leader" {
				return
			}
			term, err1 := strconv.ParseUint(f["raft_term"], 10, 64)
			off, err2 := strconv.ParseInt(f["raft_cluster_clock_offset_ms"], 10, 64)
			if err1 == nil && err2 == nil {
				got[i] = clockSample{At: time.Now(), Leader: id, Term: term, Offset: time.Duration(off) * time.Millisecond}
			}
		})
	}
	wg.Wait()
	best := clockSample{}
	for _, s := range got {
		if s.Leader != "" && s.Term >= best.Term {
			best = s
		}
	}
	return best, best.Leader != ""
}

// add counts the interval since the previous sample.
func (w *slewWatch) add(s clockSample) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Samples++
	prev, had := w.last, w.sample
	w.last, w.sample = s, true
	if !had || prev.Leader != s.Leader || prev.Term != s.Term {
		// Leadership moved in between: when is not known, so the
		// interval counts for nobody.
		return
	}
	dt := s.At.Sub(prev.At)
	moved := (s.Offset - prev.Offset).Abs()
	w.stats.Led[s.Leader] += dt
	if moved > 0 && moved.Milliseconds()*1000 >= slewMinRate*dt.Milliseconds() {
		w.stats.Slewing += dt
		w.stats.SlewingBy[s.Leader] += dt
		w.stats.SlewedMs += moved.Milliseconds()
	}
}

// latest returns the newest sample that found a leader.
func (w *slewWatch) latest() (clockSample, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.sample
}

func (w *slewWatch) result() slewStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Led, s.SlewingBy = maps.Clone(s.Led), maps.Clone(s.SlewingBy)
	s.KeeperErrors = slices.Clone(s.KeeperErrors)
	return s
}

// skew is how far node's wall clock is from cluster time as of s: cluster
// time is s's leader's wall clock plus its offset, each node's wall clock
// the true time plus its own offset. It changes only as fast as cluster
// time slews (50 ms a second), so an older sample serves.
func (w *slewWatch) skew(s clockSample, node string) time.Duration {
	return (w.offsets[node] - (w.offsets[s.Leader] + s.Offset)).Abs()
}

// farthest returns the candidate whose wall clock is farthest from cluster
// time (the first in order of a tie), and that distance; "" without a
// sample.
func (w *slewWatch) farthest(candidates []string) (string, time.Duration) {
	s, ok := w.latest()
	if !ok || len(candidates) == 0 {
		return "", 0
	}
	best := slices.MaxFunc(candidates, func(a, b string) int {
		return cmp.Compare(w.skew(s, a), w.skew(s, b))
	})
	return best, w.skew(s, best)
}

// keepSlewing is the keeper, run by the nemesis between its own steps
// (never during one): when the newest sample, taken after the nemesis'
// last change, shows a leader whose clock is cluster time, it transfers
// leadership to the running node whose clock is farthest from it. Without
// it, a kill or pause of the leader can hand leadership back to the node
// the cluster's time came from for the rest of the run (clock-hour-transfers
// seed 979884377: n1 elected back after each fault, exact clocks "Ok").
func (nm *nemesis) keepSlewing() {
	w := nm.keeper
	s, ok := w.latest()
	if !ok || !s.At.After(nm.lastChange) || time.Now().Before(nm.keepRetry) || s.Offset.Abs() > anchorSlack ||
		!nm.cl.Running(s.Leader) || nm.cl.Paused(s.Leader) {
		return
	}
	to, skew := w.farthest(nm.liveOthers(s.Leader))
	if to == "" || skew < keepMinSkew {
		return
	}
	err := adminCommand(nm.cl.Addr(s.Leader), "RAFT.TRANSFER", to)
	nm.lastChange = time.Now()
	nm.rec.nemesis("keep-slewing", fmt.Sprintf("%s -> %s (cluster time is %s's clock %+v, %s's clock %v from it) err=%v",
		s.Leader, to, s.Leader, s.Offset, to, skew, err))
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		// Mostly a target still catching up after a restart (leadership
		// transfer timeout), then busy with the same transfer (in
		// progress): give it time rather than asking every sample.
		nm.keepRetry = time.Now().Add(keepRetryAfter)
		w.stats.KeeperErrors = append(w.stats.KeeperErrors, fmt.Sprintf("%s -> %s: %v", s.Leader, to, err))
		return
	}
	w.stats.KeeperTransfers++
}

// liveOthers: the running, unpaused nodes other than node (a fault's
// follower targets, a transfer's).
func (nm *nemesis) liveOthers(node string) []string {
	var to []string
	for _, id := range nm.cl.Nodes() {
		if id != node && nm.cl.Running(id) && !nm.cl.Paused(id) {
			to = append(to, id)
		}
	}
	return to
}

// infoFields runs INFO section on addr and returns its fields.
func infoFields(addr string, timeout time.Duration, section string) (map[string]string, error) {
	c, err := dialConn(addr, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r, err := c.Do("INFO", section)
	if err != nil {
		return nil, fmt.Errorf("INFO %s on %s: %w", section, addr, err)
	}
	if r.Kind != '$' {
		return nil, fmt.Errorf("INFO %s on %s: %s", section, addr, r.Str)
	}
	f := map[string]string{}
	for _, line := range strings.Split(r.Str, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = v
		}
	}
	return f, nil
}

// TestSlewWatchCounts: an interval counts as slewing only when the same
// leader of the same term moved its offset at slewing speed; farthest
// picks the clock farthest from cluster time.
func TestSlewWatchCounts(t *testing.T) {
	w := newSlewWatch(nil, map[string]time.Duration{"n1": time.Hour, "n2": -time.Hour})
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, s := range []clockSample{
		{At: at(0), Leader: "n2", Term: 2, Offset: 2 * time.Hour},
		{At: at(250), Leader: "n2", Term: 2, Offset: 2*time.Hour - 12*time.Millisecond}, // slewing: 250 ms
		{At: at(500), Leader: "n2", Term: 2, Offset: 2*time.Hour - 25*time.Millisecond}, // slewing: 250 ms
		{At: at(1500), Leader: "n3", Term: 3, Offset: time.Hour - 75*time.Millisecond},  // leadership moved: none
		{At: at(2500), Leader: "n3", Term: 3, Offset: time.Hour - 125*time.Millisecond}, // slewing: 1 s
		{At: at(3500), Leader: "n1", Term: 4, Offset: 0},                                // moved: none
		{At: at(3750), Leader: "n1", Term: 4, Offset: -time.Millisecond},                // converged, truncation
		{At: at(4000), Leader: "n1", Term: 4, Offset: 0},                                // converged
		{At: at(4250), Leader: "n1", Term: 5, Offset: -13 * time.Millisecond},           // new term: none
	} {
		w.add(s)
	}
	st := w.result()
	if st.Slewing != 1500*time.Millisecond || st.SlewedMs != 25+50 || st.Samples != 9 {
		t.Errorf("slewing %v, %d ms, %d samples; want 1.5s, 75 ms, 9 samples", st.Slewing, st.SlewedMs, st.Samples)
	}
	if st.Led["n1"] != 500*time.Millisecond || st.SlewingBy["n1"] != 0 || st.SlewingBy["n3"] != time.Second {
		t.Errorf("led %v, slewing by leader %v", st.Led, st.SlewingBy)
	}
	// Cluster time is n1's clock (+1 h) − 13 ms: n2's is 2 h − 13 ms from it, n3's 1 h − 13 ms.
	if to, skew := w.farthest([]string{"n3", "n2"}); to != "n2" || skew != 2*time.Hour-13*time.Millisecond {
		t.Errorf("farthest = %s, %v; want n2, 1h59m59.987s", to, skew)
	}
	if to, _ := w.farthest([]string{"n3"}); to != "n3" {
		t.Errorf("farthest of n3 alone = %s", to)
	}
}
