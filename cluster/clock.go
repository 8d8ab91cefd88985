package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Cluster time (DESIGN.md, "Cluster time"). Every decision about expiry
// uses one clock, the cluster clock: the time a leader stamps on an entry
// and turns relative TTLs into deadlines with, the time a read compares
// deadlines with, active expiry's sample. It is monotone on every node,
// advances at real speed (by the node's monotonic clock) and converges on
// the current leader's wall clock by slewing, never by stepping: a new
// leader continues from the time the cluster had reached, so a deadline
// set under a leader whose wall clock was an hour ahead still lies n
// seconds after the write, and the cluster does not stay an hour ahead.
//
//   - The leader's clock: its previous reading plus the monotonic time
//     elapsed since, corrected towards its wall clock by at most
//     1/clockSlewDiv of that elapsed time.
//   - A follower's estimate: the newest entry time it applied plus the
//     monotonic time elapsed since it applied it, but never less than its
//     floor; never its wall clock. The floor is a lower bound of cluster
//     time: the newest entry time applied, advanced at the slowest speed
//     cluster time can have (1 − 1/clockSlewDiv). It matters when entries
//     are applied late: a new leader applies its predecessor's last entries
//     only after winning the election, and counting from them would lose
//     the election's duration. It is never taken from an estimate, which
//     may run ahead of a live leader slewing down (counting at full speed
//     through a pause, a cut-off, a restart): a floor ahead of the leader
//     would stay ahead, expire keys early on the follower and, once it
//     leads, step the cluster's time forward (docs/jepsen.md, findings).
//   - Readings never go back on a node: each is at least the previous one.
//   - A node that restarts guesses the cluster's time from the cluster
//     time and wall clock it saved (clockFile) before it stopped: a lower
//     bound, the saved time advanced at the slowest speed over the time
//     since the save. The guess serves until it applies an entry stamped
//     after its restart, so that time the node or the cluster spent down
//     still counts: as the leader's starting point, and as a follower's
//     estimate, which would otherwise count from the entries it replays,
//     all stamped before it stopped.
//
// Config.ClockOffset shifts the node's wall clock (test-only), so the
// Jepsen suite and the process tests can skew one node.

// clockSlewDiv bounds the slew: the cluster clock moves towards the
// leader's wall clock by at most 1/20 of the elapsed time (50 ms a second):
// while it converges, a TTL lasts between n/1.05 and n/0.95 seconds of
// real time, and an hour of skew takes 20 hours to absorb.
const clockSlewDiv = 20

// clockFile, in the data dir, holds the node's last known offset of the
// cluster clock from its own wall clock, in nanoseconds.
const clockFile = "cluster-clock"

// clockSavePeriod is how often the node refreshes clockFile: a node
// killed at once resumes from an offset at most this old (off by at most
// 1/clockSlewDiv of it).
const clockSavePeriod = 250 * time.Millisecond

// clusterClock is one node's view of cluster time, in Unix nanoseconds.
type clusterClock struct {
	mono    func() time.Duration // monotonic time since an arbitrary origin
	wall    func() int64         // this node's wall clock, Unix ns
	slewDiv int64

	mu       sync.Mutex
	anchored bool          // base holds a cluster time
	leading  bool          // as of the last reading
	base     int64         // cluster time at monotonic time at
	at       time.Duration //
	// floor is a lower bound of cluster time at monotonic time fat, which
	// the clock advances at the slowest cluster speed.
	floor int64
	fat   time.Duration
	seen  int64 // the newest entry time observed
	last  int64 // the largest reading handed out
	// cold is the restart guess of cluster time at monotonic coldAt (0:
	// none), a lower bound advanced at the slowest cluster speed; it is
	// dropped once an entry newer than it is observed.
	cold   int64
	coldAt time.Duration
	// unconfirmed: the clock was anchored on this node's own wall clock,
	// as a new cluster's first leader, from unconfirmedFrom on, and has
	// not yet applied an entry time. The cluster's time is the first one
	// its log holds, which may be another leader's (observe).
	unconfirmed     bool
	unconfirmedFrom int64
}

func newClusterClock(mono func() time.Duration, wall func() int64) *clusterClock {
	return &clusterClock{mono: mono, wall: wall, slewDiv: clockSlewDiv}
}

// now returns the cluster time in Unix milliseconds; leading says whether
// this node is the leader (its clock then slews towards its wall clock).
func (c *clusterClock) now(leading bool) int64 { return c.read(leading) / int64(time.Millisecond) }

func (c *clusterClock) read(leading bool) int64 {
	m := c.mono()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case leading && !c.leading:
		// Taking over: continue from the cluster's time as this node
		// knows it; the wall clock only by slewing, from the next reading.
		var est int64
		switch {
		case c.anchored: // the estimate counts the restart guess (c.leading is false)
			est = c.estimate(m)
		case c.cold != 0:
			est = c.cold + c.slow(m-c.coldAt)
		default: // a new cluster: its time starts at its first leader's clock
			est = c.wall()
			c.unconfirmed, c.unconfirmedFrom = true, est
		}
		if !c.anchored {
			// The floor starts with the cluster's time, here this node's
			// first reading: a first leader may lose leadership before it
			// applied an entry.
			c.floor, c.fat = max(est, c.last), m
		}
		c.base, c.at, c.anchored, c.cold = max(est, c.last), m, true, 0
	case leading:
		el := int64(m - c.at)
		cur := c.base + el
		lim := el / c.slewDiv
		cur += min(max(c.wall()-cur, -lim), lim)
		c.base, c.at = cur, m
	case !c.anchored && c.cold == 0:
		// Nothing applied yet, so no deadline to compare with: an answer
		// that is not kept, lest a skewed wall clock become the floor.
		// (A restarted node with no state's time has its restart guess
		// instead, and keeps its readings: the entries it applies next
		// may have been stamped long before, and the first one newer
		// than the guess drops it.)
		return c.wall()
	case c.leading:
		// Leadership lost, perhaps after a pause while another leader
		// slewed down: count on from the floor (the newest entry applied),
		// not from this node's last leader reading at full speed, which
		// may be ahead of the cluster by 1/clockSlewDiv of the pause.
		c.floor, c.fat = c.floor+c.slow(m-c.fat), m
		c.base, c.at = c.floor, m
	}
	c.leading = leading
	t := c.estimate(m)
	c.last = t
	return t
}

// estimate is the clock's reading at monotonic time m (not yet kept).
func (c *clusterClock) estimate(m time.Duration) int64 {
	t := max(c.base+int64(m-c.at), c.last)
	if !c.leading {
		t = max(t, c.floor+c.slow(m-c.fat))
		if c.cold != 0 {
			// A restarted follower: its state and the log entries it
			// replays were stamped before it stopped, and counting from
			// them would lose the time it was down.
			t = max(t, c.cold+c.slow(m-c.coldAt))
		}
	}
	return t
}

// slow is the least cluster time that passes in el of real time.
func (c *clusterClock) slow(el time.Duration) int64 { return int64(el) - int64(el)/c.slewDiv }

// observe tells the clock the state machine's time (the newest entry time
// applied, Unix ms) after an apply or a restore.
func (c *clusterClock) observe(entryMs int64) {
	if entryMs > 0 {
		c.observeNs(entryMs * int64(time.Millisecond))
	}
}

// handOver tells the clock a leader's reading (ns), taken as it begins to
// hand leadership to this node (raftset.clock, sent before a transfer):
// cluster time is at least that, as if an entry stamped then had just been
// applied. Without it a transfer's target takes over counting from the
// last entry it applied: a target that applied it late (catching up after
// a restart), or a transfer that lasted (the leader stamps nothing while
// one runs, yet keeps serving reads), starts that far behind the readings
// the deposed leader handed out, which never go back (docs/jepsen.md,
// findings: clock-ahead seed 776824595).
func (c *clusterClock) handOver(t int64) { c.observeNs(t) }

func (c *clusterClock) observeNs(e int64) {
	m := c.mono()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.anchored && e <= c.seen {
		return // no newer entry: keep counting from the one seen
	}
	c.seen = e
	if c.unconfirmed {
		c.unconfirmed = false
		if e < c.unconfirmedFrom {
			// This node began a new cluster's time from its own wall clock,
			// but the log's first entry time is earlier: another leader's,
			// after this one stamped nothing that committed (a transfer
			// right after the first election). That leader began the
			// cluster's time. No entry carried this node's readings, so
			// none decided anything in the state: start over from the
			// entry, even though the readings go back. Keeping them would
			// hold this node as far ahead of the cluster as its wall clock
			// is of the other leader's, expiring every key early.
			c.base, c.at, c.floor, c.fat, c.last, c.seen = e, m, e, m, e, e
			return
		}
	}
	if c.cold != 0 && e > c.cold {
		// A leader stamped this after the restart: its time is better.
		// Readings already handed out stand (last); the floor does not
		// keep the guess.
		c.cold = 0
	}
	if !c.anchored {
		c.base, c.at, c.floor, c.fat, c.anchored = e, m, e, m, true
		return
	}
	// The entry was stamped at or before now, so it is a lower bound of
	// cluster time; the estimate is not (see the floor).
	c.floor, c.fat = max(c.floor+c.slow(m-c.fat), e), m
	switch {
	case !c.leading:
		c.base, c.at = e, m
	case e > c.base+int64(m-c.at):
		// An earlier leader's entry, applied after this node took over,
		// ahead of its clock: the state machine is at that time already.
		c.base, c.at = e, m
	}
}

// restartGuess sets the restart guess from the offset (cluster time minus
// this node's wall clock) and the wall clock saved before the node
// stopped. Cluster time advanced by at least 1 − 1/clockSlewDiv of the
// time since; counting it at full speed, as the wall clock does, would put
// the guess ahead of a leader that slewed down meanwhile, by up to 1/20
// of the time the node was down. A wall clock that went back counts as
// no time.
func (c *clusterClock) restartGuess(offset, wallAt int64) {
	m := c.mono()
	c.mu.Lock()
	defer c.mu.Unlock()
	age := time.Duration(max(c.wall()-wallAt, 0))
	c.cold, c.coldAt = wallAt+offset+c.slow(age), m
}

// confirm makes this node's own start of cluster time the cluster's, before
// a user restore (Import) on a new cluster's first leader: the restored
// state's time is the backup's, older than the leader's readings, and
// restoring a backup never sets cluster time back (as in a cluster whose
// time has begun: observe keeps the newer time).
func (c *clusterClock) confirm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unconfirmed = false
}

// isAnchored reports whether the clock holds a cluster time: from an entry
// applied or a restored state, not from this node's own wall clock before
// an entry confirmed it (unconfirmed).
func (c *clusterClock) isAnchored() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.anchored && !c.unconfirmed
}

// offset returns the cluster time minus this node's wall clock (ns), the
// wall clock it was taken at, and whether the node knows cluster time
// (isAnchored: a restart guess saved from an unconfirmed clock would keep
// the node at its own wall clock, as the guess is dropped only for a newer
// entry).
func (c *clusterClock) offset(leading bool) (off, wall int64, ok bool) {
	t := c.read(leading)
	ok = c.isAnchored()
	wall = c.wall()
	return t - wall, wall, ok
}

// leading reports whether this node is the Raft leader (false before Raft
// starts) whose clock may lead: a leader whose clock has never seen an
// entry time reads as a follower until it has applied every entry of
// earlier terms (awaitTermApplied). Those entries carry the cluster's time;
// taking over from its own wall clock instead would step cluster time by
// the clocks' difference (an hour in the Jepsen row that found it: a
// leadership transfer 150 ms after the first leader's election).
func (n *Node) leading() bool {
	if !n.raftStarted.Load() || n.raft.State() != raft.Leader {
		return false
	}
	// The term check first: two atomic loads, where isAnchored takes the
	// clock's lock, which the reading that follows takes again.
	return n.rd.readyTerm.Load() == n.raft.CurrentTerm() || n.clock.isAnchored()
}

// nowMs is the cluster time in Unix milliseconds.
func (n *Node) nowMs() int64 { return n.clock.now(n.leading()) }

// ClusterTime is the cluster clock as this node reads it: what expiry on
// this node compares deadlines with, and what TIME answers.
func (n *Node) ClusterTime() time.Time { return time.Unix(0, n.clock.read(n.leading())) }

// newNodeClock makes the node's cluster clock over time.Now (shifted by
// Config.ClockOffset) and its monotonic reading.
func newNodeClock(off time.Duration) *clusterClock {
	origin := time.Now()
	return newClusterClock(func() time.Duration { return time.Since(origin) },
		func() int64 { return time.Now().Add(off).UnixNano() })
}

// startClock anchors the clock on the restored state and, after a restart,
// on the offset saved in clockFile. Call it after restoreLatest.
func (n *Node) startClock() {
	n.clock.observe(n.fsm.Clock())
	n.meta.observe = func() { n.clock.observe(n.fsm.Clock()) }
	if n.cfg.InMemory {
		return
	}
	off, at, err := readClockFile(filepath.Join(n.cfg.DataDir, clockFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		n.log.Warn("ignoring the saved cluster clock offset", "error", err)
	default:
		n.clock.restartGuess(off, at)
	}
}

// readClockFile reads clockFile: the offset of cluster time from the wall
// clock and the wall clock when it was saved, in nanoseconds. A file of
// an earlier release holds the offset alone; without the time of the save
// the guess has no bound, so it is refused (the node resumes from the
// state's time: keys live longer, never shorter).
func readClockFile(path string) (off, at int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("cluster: %s: want the offset and the time it was saved, have %d fields", path, len(f))
	}
	if off, err = strconv.ParseInt(f[0], 10, 64); err == nil {
		at, err = strconv.ParseInt(f[1], 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("cluster: %s: %w", path, err)
	}
	return off, at, nil
}

// runClock saves the clock's offset from the wall clock, and the wall
// clock it was taken at, every clockSavePeriod, for the restart guess. It
// saves even when the offset is unchanged: the guess counts the time since
// the save at the slowest cluster speed, so an old save would set it back.
func (n *Node) runClock() {
	defer n.wg.Done()
	if n.cfg.InMemory {
		return
	}
	path := filepath.Join(n.cfg.DataDir, clockFile)
	t := time.NewTicker(clockSavePeriod)
	defer t.Stop()
	save := func() {
		off, at, ok := n.clock.offset(n.leading())
		if !ok {
			return
		}
		// Rename makes the update atomic; without fsync a crash of the
		// machine may lose it, and the node then resumes from an older
		// save or the state's time (keys live longer, never shorter).
		tmp := path + ".tmp"
		err := os.WriteFile(tmp, []byte(strconv.FormatInt(off, 10)+" "+strconv.FormatInt(at, 10)+"\n"), 0o644)
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			n.log.Warn("saving the cluster clock offset", "error", err)
		}
	}
	for {
		select {
		case <-n.stopCh:
			save()
			return
		case <-t.C:
			save()
		}
	}
}
