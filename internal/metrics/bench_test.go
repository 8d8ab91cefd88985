package metrics

import (
	"fmt"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"

	"raftset/internal/stats"
)

// BenchmarkGlobalEmit is what Raft pays per sample once the sink is
// installed: go-metrics' global, then the sink.
func BenchmarkGlobalEmit(b *testing.B) {
	m := New()
	if _, err := m.InstallRaftSink(); err != nil {
		b.Fatal(err)
	}
	labels := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		gometrics.MeasureSince([]string{"raft", "commitTime"}, start)
		gometrics.MeasureSinceWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, start, labels)
		gometrics.IncrCounter([]string{"raft", "apply"}, 1)
		gometrics.SetGauge([]string{"raft", "commitNumLogs"}, 3)
	}
}

// BenchmarkGatherShards is the replicas' part of a scrape (the node
// collector alone: the Go and process collectors cost the same whatever the
// process holds) on a process holding 1 or 3 replicas, each the leader of
// two followers.
func BenchmarkGatherShards(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			node := &fakeNode{ready: true}
			for i := range n {
				node.shards = append(node.shards, shardStats(uint32(i), "leader", 3, 1000, 100,
					stats.Follower{ID: "n2", LagEntries: 1, SinceContact: time.Millisecond},
					stats.Follower{ID: "n3", LagEntries: 2, SinceContact: time.Millisecond}))
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(&nodeCollector{node: node, ready: node.Ready})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
