package metrics

import (
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
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
