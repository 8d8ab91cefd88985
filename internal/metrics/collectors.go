package metrics

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"raftset/internal/stats"
)

// Latency buckets: powers of two of nanoseconds from 8 µs to 17 s, which
// are exact edges of stats.Hist, so the exported counts are exact.
const (
	firstLatencyExp = 13
	lastLatencyExp  = 34
)

// Batch-size buckets: 1, 3, 7 ... 4095 ops per entry.
const lastBatchExp = 12

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	dCommands  = desc("raftset_commands_total", "Commands run, by command (INFO commandstats calls).", "cmd")
	dFailed    = desc("raftset_command_failed_total", "Commands that ran and answered an error, by command.", "cmd")
	dRejected  = desc("raftset_command_rejected_total", "Commands refused before they ran (arity, NOAUTH...), by command.", "cmd")
	dDuration  = desc("raftset_command_duration_seconds", "How long clients waited for replies, by command family (for writes: until committed and applied).", "family")
	dErrors    = desc("raftset_errors_total", "Error replies by error code (INFO errorstats).", "error")
	dConnected = desc("raftset_connected_clients", "Client connections open.")
	dReceived  = desc("raftset_connections_received_total", "Client connections accepted.")
	dRejConn   = desc("raftset_connections_rejected_total", "Client connections refused (maxclients, protected mode).")
	dProcessed = desc("raftset_commands_processed_total", "Commands received, known or not (INFO total_commands_processed).")
	dMaxInput  = desc("raftset_client_recent_max_input_buffer_bytes", "Largest input batch of one connection in the last 8 seconds.")
	dMaxOutput = desc("raftset_client_recent_max_output_buffer_bytes", "Largest reply batch of one connection in the last 8 seconds.")
	dSnapSize  = desc("raftset_snapshot_size_bytes", "Size of the newest snapshot file.", "shard")
	dReady     = desc("raftset_ready", "1 if /readyz answers ready.")
	dEntries   = desc("raftset_raft_entries_proposed_total", "Log entries this node proposed.", "shard")
	dOps       = desc("raftset_raft_ops_proposed_total", "Write ops in the entries this node proposed.", "shard")
	dBatch     = desc("raftset_group_commit_ops", "Write ops per proposed log entry (group commit).", "shard")
	dForwarded = desc("raftset_forwarded_write_ops_total", "Write ops this follower forwarded to the leader.", "shard")
	dReadIndex = desc("raftset_read_index_rounds_total", "Leadership confirmation rounds for linearizable reads (on the leader).", "shard")
	dLinReads  = desc("raftset_linearizable_reads_total", "Reads served after a read barrier.", "shard")
	dReadStall = desc("raftset_read_stall_refusals_total", "Read-index rounds refused because this process had stalled (SIGSTOP, a frozen VM): their readers got -TRYAGAIN (INFO raft_read_stall_refusals).", "shard")
	dReadStale = desc("raftset_read_stale_ack_refusals_total", "Read-index rounds refused because a quorum did not acknowledge requests sent after the round began: their readers got -TRYAGAIN (INFO raft_read_stale_ack_refusals).", "shard")
	dExpired   = desc("raftset_expired_keys_total", "Keys the leader proposed to delete because they expired.", "shard")
	dEvicted   = desc("raftset_evicted_keys_total", "Keys evicted for maxmemory, as applied by this replica (INFO evicted_keys).", "shard")
	dKeys      = desc("raftset_keys", "Keys in the keyspace.", "shard")
	dKeysExp   = desc("raftset_keys_with_expiry", "Keys with a deadline.", "shard")
	dHeap      = desc("raftset_memory_heap_bytes", "Go heap in use.")
	dRSS       = desc("raftset_memory_rss_bytes", "Resident set size.")
	dDataset   = desc("raftset_memory_dataset_bytes", "The state machine's accounting of its dataset (INFO used_memory_dataset).", "shard")
	dMetaVoter = desc("raftset_meta_voter", "1 if this process is a voter of the metadata group (in the configuration its replica knows).")
	dMetaEpoch = desc("raftset_meta_map_epoch", "Configuration epoch of the newest cluster map this process knows (0 until it learned the bootstrapped map).")
	dBalMoved  = desc("raftset_leader_balance_transfers_total", "Shard leaderships the automatic leader balancer of this process moved (INFO cluster_leader_balance_transfers).")
	dBalFailed = desc("raftset_leader_balance_failures_total", "Transfers of the automatic leader balancer of this process that failed (INFO cluster_leader_balance_failures).")
)

// The Raft series of a replica: the shards' carry the shard label; the
// metadata group's are names of their own, raftset_meta_raft_* (see
// raftSeries).
var (
	shardRaft = newRaftSeries("raftset_raft_", "", "shard")
	metaRaft  = newRaftSeries("raftset_meta_raft_", "Metadata group: ")
)

// raftSeries are the series of one replica of a Raft group, collected by
// the same code for a shard and for the metadata group. The metadata
// group's are separate names without a shard label rather than a
// shard="meta" value, because what users write over the shard label must
// keep meaning the data shards: sum by (instance) (raftset_raft_is_leader)
// is a process's share of the shards' leaders (what leader balancing
// evens out), count(raftset_raft_is_leader == 1) the shards led, and the
// label's values are the shard ids CLUSTER SHARDS and RAFT.SHARD use; a
// "meta" row would also lack the keyspace series every shard has.
// Prefixing the same suffixes keeps the pairs obvious
// (raftset_raft_term, raftset_meta_raft_term).
type raftSeries struct {
	term, commit, applied, lastLog, snapIdx *prometheus.Desc
	state, leader, hasLeader, leaderChg     *prometheus.Desc
	lagEntries, lagSeconds, contact         *prometheus.Desc
}

// newRaftSeries names the series prefix+suffix, their help helpPrefix+help,
// with labels before the state and peer labels of the series that have one.
func newRaftSeries(prefix, helpPrefix string, labels ...string) raftSeries {
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return desc(prefix+name, helpPrefix+help, append(slices.Clip(labels), extra...)...)
	}
	return raftSeries{
		term:       d("term", "Current Raft term."),
		commit:     d("commit_index", "Raft commit index known to this node."),
		applied:    d("applied_index", "Last log index the state machine applied."),
		lastLog:    d("last_log_index", "Last index in this node's log."),
		snapIdx:    d("last_snapshot_index", "Index of the newest snapshot."),
		state:      d("state", "1 for this node's Raft state.", "state"),
		leader:     d("is_leader", "1 if this node is the leader."),
		hasLeader:  d("has_leader", "1 if this node knows a leader."),
		leaderChg:  d("leader_changes_total", "Leader changes this node observed."),
		lagEntries: d("follower_lag_entries", "Entries the leader applied that a follower had not at its last answer (on the leader).", "peer"),
		lagSeconds: d("follower_lag_seconds", "How long ago the leader had applied what a follower still lacks (on the leader).", "peer"),
		contact:    d("follower_last_contact_seconds", "Time since a follower last answered the leader (on the leader).", "peer"),
	}
}

func (s *raftSeries) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.term, s.commit, s.applied, s.lastLog, s.snapIdx, s.state, s.leader,
		s.hasLeader, s.leaderChg, s.lagEntries, s.lagSeconds, s.contact} {
		ch <- d
	}
}

// collect sends st's Raft series with the label values labels.
func (s *raftSeries) collect(ch chan<- prometheus.Metric, st *stats.Node, labels ...string) {
	gauge(ch, s.term, float64(st.Term), labels...)
	gauge(ch, s.commit, float64(st.CommitIndex), labels...)
	gauge(ch, s.applied, float64(st.AppliedIndex), labels...)
	gauge(ch, s.lastLog, float64(st.LastLogIndex), labels...)
	gauge(ch, s.snapIdx, float64(st.LastSnapshotIndex), labels...)
	for _, state := range []string{"leader", "follower", "candidate", "shutdown"} {
		gauge(ch, s.state, b2f(st.State == state), append(slices.Clip(labels), state)...)
	}
	gauge(ch, s.leader, b2f(st.State == "leader"), labels...)
	gauge(ch, s.hasLeader, b2f(st.HasLeader), labels...)
	counter(ch, s.leaderChg, float64(st.LeaderChanges), labels...)
	for _, f := range st.Followers {
		if f.SinceContact < 0 {
			continue // not heard from yet: no lag to report
		}
		peer := append(slices.Clip(labels), f.ID)
		gauge(ch, s.lagEntries, float64(f.LagEntries), peer...)
		gauge(ch, s.lagSeconds, f.Lag.Seconds(), peer...)
		gauge(ch, s.contact, f.SinceContact.Seconds(), peer...)
	}
}

type frontendCollector struct{ fe Frontend }

func (c *frontendCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dCommands, dFailed, dRejected, dDuration, dErrors, dConnected,
		dReceived, dRejConn, dProcessed, dMaxInput, dMaxOutput} {
		ch <- d
	}
}

func (c *frontendCollector) Collect(ch chan<- prometheus.Metric) {
	families := map[string]*stats.Snapshot{}
	var order []string
	c.fe.CommandStats(func(cs stats.Command) {
		ch <- prometheus.MustNewConstMetric(dCommands, prometheus.CounterValue, float64(cs.Calls), cs.Name)
		ch <- prometheus.MustNewConstMetric(dFailed, prometheus.CounterValue, float64(cs.Failed), cs.Name)
		ch <- prometheus.MustNewConstMetric(dRejected, prometheus.CounterValue, float64(cs.Rejected), cs.Name)
		f := families[cs.Group]
		if f == nil {
			f = &stats.Snapshot{}
			families[cs.Group] = f
			order = append(order, cs.Group)
		}
		f.Merge(cs.Hist)
	})
	for _, fam := range order {
		s := families[fam]
		ch <- prometheus.MustNewConstHistogram(dDuration, s.Count, s.Sum.Seconds(), latencyBuckets(s), fam)
	}
	c.fe.ErrorStats(func(code string, n uint64) {
		ch <- prometheus.MustNewConstMetric(dErrors, prometheus.CounterValue, float64(n), code)
	})
	cl := c.fe.ClientStats()
	gauge(ch, dConnected, float64(cl.Connected))
	counter(ch, dReceived, float64(cl.Received))
	counter(ch, dRejConn, float64(cl.Rejected))
	counter(ch, dProcessed, float64(cl.Commands))
	gauge(ch, dMaxInput, float64(cl.RecentMaxInput))
	gauge(ch, dMaxOutput, float64(cl.RecentMaxOutput))
}

func latencyBuckets(s *stats.Snapshot) map[float64]uint64 {
	b := make(map[float64]uint64, lastLatencyExp-firstLatencyExp+1)
	for e := firstLatencyExp; e <= lastLatencyExp; e++ {
		b[float64(uint64(1)<<e)/1e9] = s.CountBelow(e)
	}
	return b
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// nodeCollector exports the replicas' series, one set per shard the
// process holds at the scrape (so a replica added or removed while it runs
// gains or loses its series without a restart), and the process's own.
type nodeCollector struct {
	node  Node
	ready func() (bool, string)
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	shardRaft.describe(ch)
	metaRaft.describe(ch)
	for _, d := range []*prometheus.Desc{dSnapSize, dReady, dEntries, dOps, dBatch, dForwarded, dReadIndex,
		dLinReads, dReadStall, dReadStale, dExpired, dEvicted, dKeys, dKeysExp, dHeap, dRSS, dDataset, dMetaVoter, dMetaEpoch, dBalMoved,
		dBalFailed} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ready, _ := c.ready()
	gauge(ch, dReady, b2f(ready))
	ps := c.node.ProcessStats()
	gauge(ch, dHeap, float64(ps.HeapBytes))
	gauge(ch, dRSS, float64(ps.RSSBytes))
	for _, st := range c.node.ShardStats() {
		collectShard(ch, &st)
	}
	if ms, ok := c.node.MetaStats(); ok {
		gauge(ch, dMetaVoter, b2f(ms.Voter))
		gauge(ch, dMetaEpoch, float64(ms.Epoch))
		counter(ch, dBalMoved, float64(ms.BalanceTransfers))
		counter(ch, dBalFailed, float64(ms.BalanceFailures))
		if ms.Replica != nil {
			metaRaft.collect(ch, ms.Replica)
		}
	}
}

// collectShard sends one replica's series, labelled with its shard.
func collectShard(ch chan<- prometheus.Metric, st *stats.Node) {
	sh := strconv.FormatUint(uint64(st.Shard), 10)
	shardRaft.collect(ch, st, sh)
	gauge(ch, dSnapSize, float64(st.LastSnapshotSize), sh)
	counter(ch, dEntries, float64(st.EntriesProposed), sh)
	counter(ch, dOps, float64(st.OpsProposed), sh)
	if b := st.BatchOps; b != nil {
		// Counts below 2^e are exact: as ops are whole, that is le 2^e-1.
		buckets := make(map[float64]uint64, lastBatchExp)
		for e := 1; e <= lastBatchExp; e++ {
			buckets[float64(uint64(1)<<e-1)] = b.CountBelow(e)
		}
		ch <- prometheus.MustNewConstHistogram(dBatch, b.Count, float64(b.Sum), buckets, sh)
	}
	counter(ch, dForwarded, float64(st.ForwardedOps), sh)
	counter(ch, dReadIndex, float64(st.ReadIndexRounds), sh)
	counter(ch, dLinReads, float64(st.LinearizableReads), sh)
	counter(ch, dReadStall, float64(st.ReadStallRefusals), sh)
	counter(ch, dReadStale, float64(st.ReadStaleAcks), sh)
	counter(ch, dExpired, float64(st.ExpiredProposed), sh)
	counter(ch, dEvicted, float64(st.EvictedKeys), sh)
	gauge(ch, dKeys, float64(st.Keys), sh)
	gauge(ch, dKeysExp, float64(st.KeysWithExpiry), sh)
	gauge(ch, dDataset, float64(st.DatasetBytes), sh)
}
