package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeTime is true time for fake clocks: every node's monotonic clock
// reads it, and each node's wall clock is it plus the node's offset.
type fakeTime struct{ t time.Duration }

const epoch = int64(1_700_000_000_000) * int64(time.Millisecond) // Unix ns of true time 0

func (ft *fakeTime) node(offset time.Duration) *clusterClock {
	return newClusterClock(func() time.Duration { return ft.t },
		func() int64 { return epoch + int64(ft.t+offset) })
}

// trueMs is true time in Unix ms.
func (ft *fakeTime) trueMs() int64 { return (epoch + int64(ft.t)) / int64(time.Millisecond) }

const ms = int64(time.Millisecond)

// A new cluster's first leader starts at its wall clock and then follows
// it exactly; a follower counts from the entries it applied.
func TestClusterClockNewClusterFollowsItsLeader(t *testing.T) {
	ft := &fakeTime{}
	l, f := ft.node(0), ft.node(time.Hour)
	if got := l.now(true); got != ft.trueMs() {
		t.Fatalf("first reading %d, want the leader's wall clock %d", got, ft.trueMs())
	}
	// A follower that applied nothing has nothing to compare deadlines with;
	// its wall clock answers but is not kept as a floor.
	if got := f.now(false); got != ft.trueMs()+time.Hour.Milliseconds() {
		t.Fatalf("unanchored follower reading %d", got)
	}
	for range 100 {
		ft.t += 37 * time.Millisecond
		now := l.now(true)
		if now != ft.trueMs() {
			t.Fatalf("at %v the leader reads %d, want its wall clock %d", ft.t, now, ft.trueMs())
		}
		f.observe(now)
		ft.t += 3 * time.Millisecond
		if got := f.now(false); got != now+3 {
			t.Fatalf("follower reads %d, want the last entry's time + 3 ms = %d (never its own wall clock)", got, now+3)
		}
	}
}

// slewCase: the cluster's time is at the state machine's clock, a node
// whose wall clock is off by skew takes over. Its readings are monotone,
// advance at between 0.95 and 1.05 of real speed while they converge,
// reach its wall clock after about |skew|*20, and follow it from then on.
func TestClusterClockSlewsTowardsTheLeadersWallClock(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour, 300 * time.Millisecond, -2 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			ft := &fakeTime{}
			c := ft.node(skew)
			state := ft.trueMs()
			c.observe(state) // the state a previous leader left, true time
			prev, prevT := c.read(true), ft.t
			if prev != state*ms {
				t.Fatalf("takes over at %d, want the state's time %d", prev, state*ms)
			}
			step := time.Second + 7*time.Millisecond
			converged := time.Duration(0)
			for ft.t < 25*time.Duration(max(skew, -skew))+time.Minute {
				ft.t += step
				now := c.read(true)
				el := int64(ft.t - prevT)
				if d := now - prev; d < el-el/20 || d > el+el/20 {
					t.Fatalf("at %v the clock advanced %d ns in %d ns: beyond the 5%% slew", ft.t, d, el)
				}
				wall := c.wall()
				if converged == 0 && now == wall {
					converged = ft.t
				}
				if converged != 0 && now != wall {
					t.Fatalf("at %v, converged at %v, the clock reads %d, wall %d", ft.t, converged, now, wall)
				}
				prev, prevT = now, ft.t
			}
			want := 20 * time.Duration(max(skew, -skew))
			if converged == 0 || converged < want || converged > want+want/10+2*step {
				t.Fatalf("converged at %v, want about %v", converged, want)
			}
		})
	}
}

// The scenario, in true time: a deadline set as "now + 60 s" on
// the cluster clock passes between 60/1.05 and 60/0.95 s later, on every
// node, while leadership moves every few seconds between a node an hour
// ahead, a true one and one an hour behind, each applying the leader's
// entries; and no node's readings ever go back.
func TestClusterClockDeadlinesAcrossSkewedTransfers(t *testing.T) {
	ft := &fakeTime{}
	nodes := []*clusterClock{ft.node(time.Hour), ft.node(0), ft.node(-time.Hour)}
	last := make([]int64, len(nodes))
	type deadline struct {
		at     int64         // cluster ms
		setAt  time.Duration // true time of the SET
		passed []time.Duration
	}
	var ds []*deadline
	leader := 0
	for i := 0; ft.t < 10*time.Minute; i++ {
		ft.t += time.Duration(1+i%7) * time.Millisecond
		if i%1000 == 0 { // a transfer, to the next node in turn
			leader = (leader + 1 + i/1000%2) % len(nodes)
		}
		now := nodes[leader].now(true) // the leader stamps an entry
		if i%500 == 0 {
			ds = append(ds, &deadline{at: now + 60_000, setAt: ft.t, passed: make([]time.Duration, len(nodes))})
		}
		for j, c := range nodes {
			if j != leader {
				c.observe(now)
			}
			r := c.now(j == leader)
			if r < last[j] {
				t.Fatalf("node %d went back from %d to %d at %v", j, last[j], r, ft.t)
			}
			last[j] = r
			for _, d := range ds {
				if d.passed[j] == 0 && r >= d.at {
					d.passed[j] = ft.t
				}
			}
		}
	}
	checked := 0
	for _, d := range ds {
		for j, p := range d.passed {
			if p == 0 {
				continue
			}
			checked++
			if life := p - d.setAt; life < 57*time.Second || life > 64*time.Second {
				t.Errorf("node %d: a 60 s deadline set at %v passed after %v", j, d.setAt, life)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d deadlines passed", checked)
	}
}

// A follower's estimate is the newest entry's time plus the time since it
// applied it, but never below its previous estimate advanced at 0.95 of
// real speed: an entry behind the estimate (a leader slewing down) slows
// it rather than moving it back; one ahead (a leader slewing up) moves it
// forward; an older time changes nothing.
func TestClusterClockFollowerEstimate(t *testing.T) {
	ft := &fakeTime{}
	f := ft.node(time.Hour)
	f.observe(1_000_000)
	ft.t += 100 * time.Millisecond
	if got := f.now(false); got != 1_000_100 {
		t.Fatalf("estimate %d, want 1000100", got)
	}
	f.observe(1_000_090) // the leader's clock ran slower
	if got := f.now(false); got != 1_000_100 {
		t.Fatalf("estimate after an entry behind it %d, want it held at 1000100", got)
	}
	ft.t += 20 * time.Millisecond
	if got := f.now(false); got != 1_000_119 {
		t.Fatalf("estimate %d, want 1000119 (1000100 + 0.95 * 20 ms)", got)
	}
	f.observe(1_000_200) // the leader's clock ran faster
	if got := f.now(false); got != 1_000_200 {
		t.Fatalf("estimate after an entry ahead of it %d, want 1000200", got)
	}
	f.observe(1_000_150) // an older time (a non-command entry) changes nothing
	ft.t += 10 * time.Millisecond
	if got := f.now(false); got != 1_000_210 {
		t.Fatalf("estimate %d, want 1000210", got)
	}
}

// The Jepsen run that found it: a leader dies; the follower that wins
// the election a second later applies the dead leader's last entries
// only then. Counting from them would set the cluster back by the
// election's duration, and every key would live a second longer.
func TestClusterClockLateAppliedEntriesKeepTheTime(t *testing.T) {
	ft := &fakeTime{}
	f := ft.node(0)
	f.observe(5_000_000)
	ft.t += time.Second  // the election
	f.observe(5_000_010) // stamped 10 ms after the previous one, applied now
	got := f.now(true)
	if got < 5_000_950 || got > 5_001_000 {
		t.Fatalf("the new leader starts at %d, want about a second after the last entry it had (5001000)", got)
	}
}

// A new leader that applies an earlier leader's entry ahead of its own
// clock moves up to it (the state is there already), and keeps slewing.
func TestClusterClockLeaderCatchesUpWithTheState(t *testing.T) {
	ft := &fakeTime{}
	c := ft.node(0)
	c.observe(ft.trueMs())
	start := c.now(true)
	c.observe(start + 500)
	ft.t += time.Millisecond
	if got := c.now(true); got < start+500 || got > start+502 {
		t.Fatalf("reading %d, want about the applied entry's time %d", got, start+500)
	}
}

// A restarted node that leads before hearing of a newer entry continues
// from its wall clock plus the offset it saved, so the time the cluster
// was down counts; one that applied a newer entry first ignores the guess.
func TestClusterClockRestartGuess(t *testing.T) {
	for _, heard := range []bool{false, true} {
		t.Run("heard-newer-entry="+strconv.FormatBool(heard), func(t *testing.T) {
			ft := &fakeTime{}
			c := ft.node(time.Hour)
			c.observe(ft.trueMs() - 10_000)   // the state: its last entry, 10 s ago
			c.restartGuess(-int64(time.Hour)) // saved: the cluster was an hour behind its wall
			ft.t += 2 * time.Second
			if heard {
				c.observe(ft.trueMs() - 1_000) // a live leader's entry, its clock a second behind
			}
			got := c.now(true)
			want := ft.trueMs()
			if heard {
				want -= 1_000
			}
			if got != want {
				t.Fatalf("takes over at %d, want %d", got, want)
			}
		})
	}
}

// The Jepsen run that found it (ttl-clock-ahead, seed 792752419): the
// leader and a follower are killed together for 3.6 s; the follower
// restarts from a snapshot, the survivor wins the election, and the
// follower replays the log entries stamped before the kill. A key set
// 20 ms before the kill with PX 2261 had expired 1.5 s before; the
// follower, counting from the replayed entries, answered TTL 2. It must
// count the time it was down, from the restart guess, as a leader does;
// an entry stamped after the restart replaces the guess, and no reading
// goes back.
func TestClusterClockRestartedFollowerCountsTheOutage(t *testing.T) {
	ft := &fakeTime{}
	const skew = 250 * time.Millisecond // n2's wall clock is true; the cluster ran 250 ms ahead (n1's)
	kill := ft.trueMs() + skew.Milliseconds()
	deadline := kill - 20 + 2261 // SET PX 2261, 20 ms before the kill

	ft.t += 3617 * time.Millisecond // the outage
	f := ft.node(0)
	f.observe(kill - 5_000)        // the snapshot it restores
	f.restartGuess(int64(skew))    // saved just before the kill
	ft.t += 120 * time.Millisecond // the survivor wins and commits the old entries
	for e := kill - 1_000; e <= kill; e += 100 {
		f.observe(e) // replayed, stamped before the kill
	}
	want := kill + 3_617 + 120 // cluster time: the outage counted at real speed
	if got := f.now(false); got < want-5 || got > want+5 {
		t.Fatalf("the restarted follower reads %d, want about %d (it would see the key expiring at %d alive for %d ms more)",
			got, want, deadline, deadline-got)
	}

	ft.t += 10 * time.Millisecond
	before := f.now(false)
	f.observe(want + 5) // the new leader's first entry, stamped after the restart
	if got := f.now(false); got < before || got > want+15 {
		t.Fatalf("after the first fresh entry the follower reads %d, want in [%d, %d]", got, before, want+15)
	}
	ft.t += time.Second
	if got := f.now(false); got != want+5+1_000 {
		t.Fatalf("a second later the follower reads %d, want the fresh entry's time + 1 s = %d", got, want+5+1_000)
	}
}

// The node saves the clock's offset from its wall clock and a restart
// reads it back.
func TestClockFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), clockFile)
	if err := os.WriteFile(path, []byte("-3600000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := readClockFile(path); err != nil || v != -int64(time.Hour) {
		t.Fatalf("readClockFile = %d, %v", v, err)
	}
	if err := os.WriteFile(path, []byte("soon"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readClockFile(path); err == nil || !strings.Contains(err.Error(), clockFile) {
		t.Fatalf("readClockFile of garbage: %v", err)
	}
}
