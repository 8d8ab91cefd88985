package cluster

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/memlimit"
	"raftset/internal/stats"
)

// InfoSection is one "# Name" block of INFO: ordered field/value pairs.
// It has the shape of resp.InfoSection.
type InfoSection struct {
	Name   string
	Fields [][2]string
}

// Info returns the INFO sections the node owns: Memory, Persistence,
// Replication, Keyspace and Raft.
func (n *Node) Info() []InfoSection {
	stats := n.raft.Stats()
	return []InfoSection{
		n.infoMemory(),
		n.infoStats(),
		n.infoPersistence(stats),
		n.infoReplication(),
		n.infoKeyspace(),
		n.infoRaft(stats),
	}
}

func kv(k, v string) [2]string { return [2]string{k, v} }

func itoa[T ~int | ~int64 | ~uint64 | ~uint32](v T) string {
	switch x := any(v).(type) {
	case uint64:
		return strconv.FormatUint(x, 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	}
	return strconv.FormatInt(int64(v), 10)
}

func (n *Node) infoMemory() InfoSection {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	used := ms.HeapAlloc
	for {
		peak := n.st.peakHeap.Load()
		if used <= peak || n.st.peakHeap.CompareAndSwap(peak, used) {
			break
		}
	}
	peak := n.st.peakHeap.Load()
	rss := rssBytes()
	ecfg, dataset := fsm.DefaultEvictConfig(), int64(ms.HeapAlloc)
	if ev := n.evictor(); ev != nil {
		ecfg, dataset = ev.EvictConfig(), ev.UsedMemory()
	}
	frag := "0.00"
	if used > 0 && rss > 0 {
		frag = strconv.FormatFloat(float64(rss)/float64(used), 'f', 2, 64)
	}
	return InfoSection{Name: "Memory", Fields: [][2]string{
		kv("used_memory", itoa(used)),
		kv("used_memory_human", humanBytes(used)),
		kv("used_memory_rss", itoa(rss)),
		kv("used_memory_rss_human", humanBytes(rss)),
		kv("used_memory_peak", itoa(peak)),
		kv("used_memory_peak_human", humanBytes(peak)),
		// What maxmemory bounds: the state machine's accounting of the
		// dataset (fsm/access.go), the same on every replica at the same
		// index (docs/cache.md).
		kv("used_memory_dataset", itoa(dataset)),
		kv("total_system_memory", itoa(totalSystemMemory())),
		kv("go_heap_sys", itoa(ms.HeapSys)),
		kv("go_num_gc", itoa(ms.NumGC)),
		kv("active_defrag_moved_bytes", itoa(n.st.defragMoved.Load())),
		kv("active_defrag_cycles", itoa(n.st.defragCycles.Load())),
		kv("active_defrag_slab_bytes", itoa(n.st.defragSlabBytes.Load())),
		kv("go_goroutines", itoa(runtime.NumGoroutine())),
		kv("maxmemory", itoa(ecfg.MaxMemory)),
		kv("maxmemory_human", humanBytes(uint64(ecfg.MaxMemory))),
		kv("maxmemory_policy", ecfg.Policy.String()),
		kv("go_memory_limit", itoa(debug.SetMemoryLimit(-1))),
		kv("go_gc_percent", strconv.Itoa(memlimit.RuntimePercent())),
		kv("mem_fragmentation_ratio", frag),
		kv("mem_allocator", "go-"+runtime.Version()),
	}}
}

// rssBytes reads the resident set size from /proc/self/statm (0 elsewhere).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// totalSystemMemory reads MemTotal from /proc/meminfo (0 elsewhere).
func totalSystemMemory() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// humanBytes formats like Redis's bytesToHuman: 1023B, 1.50K, 2.00M ...
func humanBytes(b uint64) string {
	const unit = 1024.0
	f := float64(b)
	switch {
	case f < unit:
		return itoa(b) + "B"
	case f < unit*unit:
		return strconv.FormatFloat(f/unit, 'f', 2, 64) + "K"
	case f < unit*unit*unit:
		return strconv.FormatFloat(f/unit/unit, 'f', 2, 64) + "M"
	case f < unit*unit*unit*unit:
		return strconv.FormatFloat(f/unit/unit/unit, 'f', 2, 64) + "G"
	}
	return strconv.FormatFloat(f/unit/unit/unit/unit, 'f', 2, 64) + "T"
}

func parseU(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

func (n *Node) infoPersistence(stats map[string]string) InfoSection {
	applied := parseU(stats["applied_index"])
	snap := parseU(stats["last_snapshot_index"])
	changes := uint64(0)
	if applied > snap {
		changes = applied - snap
	}
	bg := "0"
	if n.bgsave.Load() {
		bg = "1"
	}
	return InfoSection{Name: "Persistence", Fields: [][2]string{
		kv("loading", "0"),
		kv("async_loading", "0"),
		kv("rdb_changes_since_last_save", itoa(changes)),
		kv("rdb_bgsave_in_progress", bg),
		kv("rdb_last_save_time", itoa(n.lastSaveTime())),
		kv("rdb_last_bgsave_status", "ok"),
		kv("rdb_saves", itoa(n.st.saves.Load())),
		kv("rdb_last_snapshot_index", itoa(snap)),
		kv("aof_enabled", "0"),
		kv("aof_rewrite_in_progress", "0"),
		kv("aof_rewrite_scheduled", "0"),
		kv("aof_last_write_status", "ok"),
	}}
}

func (n *Node) infoReplication() InfoSection {
	offset := itoa(n.fsm.AppliedIndex())
	if n.raft.State() == raft.Leader {
		others := n.otherServers()
		lags := n.followers()
		f := [][2]string{kv("role", "master"), kv("connected_slaves", itoa(len(others)))}
		for i, s := range others {
			host, port := n.clientHostPort(s)
			// Redis's offset and lag (seconds since the replica's last
			// answer, -1 before any), then raftset's lag_entries and lag_ms:
			// how far behind the leader's applied index it is, in entries
			// and in time (obs.go).
			var fl stats.Follower
			for _, l := range lags {
				if l.ID == string(s.ID) {
					fl = l
				}
			}
			lag := int64(-1)
			if fl.SinceContact >= 0 && fl.ID != "" {
				lag = int64(fl.SinceContact / time.Second)
			}
			f = append(f, kv("slave"+itoa(i), "ip="+host+",port="+port+",state=online,offset="+itoa(fl.Applied)+
				",lag="+itoa(lag)+",lag_entries="+itoa(fl.LagEntries)+",lag_ms="+itoa(fl.Lag.Milliseconds())))
		}
		return InfoSection{Name: "Replication", Fields: append(f,
			kv("master_failover_state", "no-failover"),
			kv("master_repl_offset", offset),
		)}
	}
	_, addr := n.leaderClient()
	host, port := splitAddr(addr)
	link, lastIO := "down", "-1"
	if addr != "" {
		link = "up"
		if lc := n.raft.LastContact(); !lc.IsZero() {
			lastIO = itoa(int64(time.Since(lc).Seconds()))
		}
	}
	return InfoSection{Name: "Replication", Fields: [][2]string{
		kv("role", "slave"),
		kv("master_host", host),
		kv("master_port", port),
		kv("master_link_status", link),
		kv("master_last_io_seconds_ago", lastIO),
		kv("master_sync_in_progress", "0"),
		kv("slave_repl_offset", offset),
		kv("slave_priority", "100"),
		kv("slave_read_only", "1"),
		kv("connected_slaves", "0"),
		kv("master_repl_offset", offset),
	}}
}

func (n *Node) infoKeyspace() InfoSection {
	keys, expires := n.fsm.KeyspaceCounts()
	s := InfoSection{Name: "Keyspace"}
	if keys > 0 {
		avg := int64(0)
		if ev := n.evictor(); ev != nil && expires > 0 {
			avg = ev.AvgTTL(n.nowMs())
		}
		s.Fields = [][2]string{kv("db0", "keys="+itoa(keys)+",expires="+itoa(expires)+",avg_ttl="+itoa(avg))}
	}
	return s
}

// infoStats is the node's part of INFO stats (the front end has the rest):
// the key counters of the state machine, named and placed as in Redis.
// expired_keys and evicted_keys count deletions applied on this node, so a
// follower reports the leader's; keyspace_hits and keyspace_misses count
// the reads served here.
func (n *Node) infoStats() InfoSection {
	var c fsm.Counters
	if ev := n.evictor(); ev != nil {
		c = ev.Counters()
	}
	return InfoSection{Name: "Stats", Fields: [][2]string{
		kv("expired_keys", itoa(c.Expired)),
		kv("expired_stale_perc", strconv.FormatFloat(c.StalePerc, 'f', 2, 64)),
		kv("evicted_keys", itoa(c.Evicted)),
		kv("keyspace_hits", itoa(c.Hits)),
		kv("keyspace_misses", itoa(c.Misses)),
	}}
}

func (n *Node) infoRaft(stats map[string]string) InfoSection {
	addr, id := n.Leader()
	entries, ops := n.st.entries.Load(), n.st.ops.Load()
	avg := "0.00"
	if entries > 0 {
		avg = strconv.FormatFloat(float64(ops)/float64(entries), 'f', 2, 64)
	}
	// The cluster clock and how far it is from this node's wall clock
	// (clock.go): while it slews, the offset shrinks by 50 ms a second.
	clock := n.clock.read(n.leading())
	wall := n.clock.wall()
	logSyncs := n.walSyncs
	return InfoSection{Name: "Raft", Fields: [][2]string{
		kv("raft_node_id", n.cfg.NodeID),
		kv("raft_state", strings.ToLower(stats["state"])),
		kv("raft_term", stats["term"]),
		kv("raft_leader_id", id),
		kv("raft_leader_addr", addr),
		kv("raft_leader_client_addr", n.ClientAddr(id)),
		kv("raft_commit_index", stats["commit_index"]),
		kv("raft_applied_index", itoa(n.fsm.AppliedIndex())),
		kv("raft_last_log_index", stats["last_log_index"]),
		kv("raft_last_log_term", stats["last_log_term"]),
		kv("raft_last_snapshot_index", stats["last_snapshot_index"]),
		kv("raft_last_snapshot_term", stats["last_snapshot_term"]),
		kv("raft_log_size_snapshots", itoa(n.st.logSizeSnapshots.Load())),
		kv("raft_fsm_pending", stats["fsm_pending"]),
		kv("raft_num_peers", stats["num_peers"]),
		kv("raft_last_contact", stats["last_contact"]),
		kv("raft_protocol_version", stats["protocol_version"]),
		kv("raft_entries_proposed", itoa(entries)),
		kv("raft_ops_proposed", itoa(ops)),
		kv("raft_avg_ops_per_entry", avg),
		kv("raft_read_barriers", itoa(n.st.readBarriers.Load())),
		kv("raft_read_stall_refusals", itoa(n.stall.refused.Load())),
		kv("raft_read_stale_ack_refusals", itoa(n.staleAckRefusals())),
		kv("raft_linearizable_reads", itoa(n.st.reads.Load())),
		kv("raft_forwarded_write_ops", itoa(n.st.forwarded.Load())),
		kv("raft_expired_keys_proposed", itoa(n.st.expired.Load())),
		kv("raft_evicted_keys_proposed", itoa(n.ev.proposed.Load())),
		kv("raft_active_expire", boolDigit(n.activeExpire.Load())),
		kv("raft_cluster_clock_ms", strconv.FormatInt(clock/int64(time.Millisecond), 10)),
		kv("raft_cluster_clock_offset_ms", strconv.FormatInt((clock-wall)/int64(time.Millisecond), 10)),
		kv("raft_refused_connections", itoa(n.RaftRefused())),
		kv("raft_log_syncs", itoa(logSyncs.syncs.Load())),
		kv("raft_log_syncs_holding_cpu", itoa(logSyncs.held.Load())),
		kv("raft_log_syncs_deferred", itoa(n.walDeferred())),
	}}
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
