package cluster

import (
	"time"

	"github.com/hashicorp/raft"
)

// slowLogStore adds a fixed delay to every StoreLogs, standing in for an
// fsync, so that throughput benchmarks do not depend on the machine's disk.
type slowLogStore struct {
	raft.LogStore
	delay time.Duration
}

func (s slowLogStore) StoreLogs(logs []*raft.Log) error {
	deadline := time.Now().Add(s.delay)
	err := s.LogStore.StoreLogs(logs)
	time.Sleep(time.Until(deadline))
	return err
}

func (s slowLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }
