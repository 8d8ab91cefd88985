package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/testutil"
)

// newNode starts a member's node on f, wrapped by c.wrap when set.
func (c *servedCluster) newNode(cfg Config, f *fsm.FSM) (*Node, error) {
	if c.wrap == nil {
		return New(cfg, f)
	}
	n, err := newNode(cfg, c.wrap(cfg.NodeID, f))
	if err == nil {
		f.SetSnapshotAux(n.membershipAux)
	}
	return n, err
}

// gatedFSM applies nothing more, once it knows the client address of node
// leader, until open is closed: a node whose state machine lags however far
// the test wants, yet can reach the leader (addresses are applied state).
type gatedFSM struct {
	*fsm.FSM
	open   <-chan struct{}
	leader string
}

func (g gatedFSM) Apply(l *raft.Log) any {
	if g.ClientAddr(g.leader) != "" {
		<-g.open
	}
	return g.FSM.Apply(l)
}

func (g gatedFSM) ApplyBatch(logs []*raft.Log) []any {
	if g.ClientAddr(g.leader) != "" {
		<-g.open
	}
	return g.FSM.ApplyBatch(logs)
}

// A joining node is promoted only once it is within promote-lag entries of
// the leader, not as soon as it answers.
func TestPromotionWaitsForCatchUp(t *testing.T) {
	const lag = 20
	c := newServedCluster(t, 3, func(cfg *Config) { cfg.PromoteLag = lag })
	l := c.leader()
	for i := range 5 * lag {
		if got := write1(t, l.node, "sadd", "s", fmt.Sprint(i)); got != ":1\r\n" {
			t.Fatalf("SADD = %q", got)
		}
	}
	gate := make(chan struct{})
	var once sync.Once
	openGate := func() { once.Do(func() { close(gate) }) }
	c.wrap = func(id string, f *fsm.FSM) stateMachine {
		if id == "n4" {
			return gatedFSM{FSM: f, open: gate, leader: l.id}
		}
		return f
	}
	cfg := clusterConfig(t, "n4")
	cfg.Bootstrap = false
	cfg.Join = l.cfg.ClientAddr
	cfg.PromoteLag = lag
	n4 := c.start(cfg)
	t.Cleanup(openGate) // runs before the member's stop: Raft cannot shut down a blocked FSM

	// Any voter's view of the configuration, and refusals counted by
	// whichever node leads: an election on a loaded machine changes nothing.
	suffrage := func() string {
		info := string(c.members[0].node.Admin(context.Background(), args("raft.info")))
		for _, line := range strings.Split(info, "\r\n") {
			if strings.Contains(line, "id=n4,") {
				_, rest, _ := strings.Cut(line, "suffrage=")
				s, _, _ := strings.Cut(rest, ",")
				return s
			}
		}
		return ""
	}
	refusals := func() uint64 {
		var sum uint64
		for _, m := range c.members[:3] {
			sum += m.node.st.promotionsRefused.Load()
		}
		return sum
	}
	refused := refusals()
	testutil.WaitFor(t, 10*time.Second, "the leader to refuse n4's promotion twice", func() bool {
		return refusals() >= refused+2
	})

	if s := suffrage(); s != "nonvoter" {
		t.Fatalf("n4 suffrage while %d entries behind = %q, want nonvoter", l.node.fsm.AppliedIndex()-n4.fsm.AppliedIndex(), s)
	}
	openGate()
	testutil.WaitFor(t, 10*time.Second, "n4 promoted once caught up", func() bool { return suffrage() == "voter" })
	if behind := int64(l.node.fsm.AppliedIndex()) - int64(n4.fsm.AppliedIndex()); behind > lag+10 {
		t.Errorf("n4 is %d entries behind right after its promotion", behind)
	}
}
