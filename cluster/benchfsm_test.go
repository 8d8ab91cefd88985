package cluster

import (
	"testing"

	"raftset/fsm"
)

func newBenchFSM(testing.TB) stateMachine { return fsm.New(fsm.Config{}) }
