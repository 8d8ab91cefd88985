package cluster

import (
	"context"
	"sync"
	"time"

	"raftset/internal/command"
	"raftset/internal/strictint"
)

// WAIT (issue #5): "numreplicas timeout" answers how many nodes other than
// this one (as Redis counts replicas, not itself) have applied the
// connection's last write. hashicorp/raft does not expose how far each
// follower got, so WAIT asks the other members for their applied index
// (raftset.applied, over a pool like forwarding's) and counts those at or past
// the write's index. Every node applies the same entries at the same
// indexes, so comparing one node's index with another's is meaningful.
//
// The write's index comes from WriteIndexed: on the leader, the state
// machine's applied index right after the write was answered (an entry at
// or after the write's own: a node that applied it applied the write); on a
// follower, the leader's, carried back in the forward reply. A write whose
// reply was an error moves it forward too: WAIT may then wait for a little
// more than it must, never for less.

const (
	// firstRoundWait bounds how long WAIT waits for the first answer of each
	// member before it may reply: a paused member must not hold up a WAIT
	// that the others already satisfy.
	firstRoundWait = 200 * time.Millisecond
	// appliedQueryTimeout bounds one raftset.applied round trip.
	appliedQueryTimeout = time.Second
	// maxAppliedPoll is the longest pause between two queries to a member
	// that has not caught up yet.
	maxAppliedPoll = 20 * time.Millisecond
	// memberRescan is how often a waiting WAIT looks for members it does not
	// poll yet (joined, or published their client address, meanwhile).
	memberRescan = 100 * time.Millisecond
)

// Wait is WAIT numreplicas timeout for a connection whose last write is
// covered by index. Like Redis it answers at once when enough members
// already applied it, else blocks until they have or the timeout (in ms, 0
// = forever) passes, and replies with the count at that moment.
func (n *Node) Wait(ctx context.Context, args [][]byte, index uint64) []byte {
	if len(args) != 3 {
		return command.Error(command.ErrArity("wait"))
	}
	want, ok := strictint.Parse(args[1])
	if !ok {
		return command.Error(command.ErrNotInteger)
	}
	ms, ok := strictint.Parse(args[2])
	if !ok {
		return command.Error("ERR timeout is not an integer or out of range")
	}
	if ms < 0 {
		return command.Error("ERR timeout is negative")
	}
	if ms > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(min(ms, int64(1<<62/time.Millisecond)))*time.Millisecond)
		defer cancel()
	}
	return command.AppendInt(nil, int64(n.countApplied(ctx, index, want)))
}

// countApplied counts the other members that have applied index, polling
// them until want of them have or ctx ends. Members that join, or publish
// their client address, while it waits are polled from then on.
func (n *Node) countApplied(ctx context.Context, index uint64, want int64) int {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(n.ctx, cancel) // the node closes
	defer stop()
	var wg sync.WaitGroup
	defer func() {
		cancel() // the pollers stop
		wg.Wait()
	}()
	// Pollers send at most two answers each, and give up sending when ctx
	// ends, so the buffer only saves them waiting.
	answers := make(chan bool, 2*len(n.otherServers()))
	polled := map[string]bool{}
	// pollNew starts a poller for every member not polled yet whose client
	// address is known, and returns how many it started.
	pollNew := func() int {
		started := 0
		for _, s := range n.otherServers() {
			id := string(s.ID)
			addr := n.ClientAddr(id)
			if polled[id] || addr == "" {
				continue // unreachable until it publishes where to ask
			}
			polled[id] = true
			started++
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.pollApplied(ctx, id, addr, index, answers)
			}()
		}
		return started
	}
	pending := pollNew() // members whose first answer is awaited
	count := 0
	first := time.NewTimer(firstRoundWait)
	defer first.Stop()
	rescan := time.NewTicker(memberRescan)
	defer rescan.Stop()
	firstRound := pending > 0
	for {
		if !firstRound && int64(count) >= want {
			return count
		}
		select {
		case applied := <-answers:
			if applied {
				count++
			}
			if firstRound {
				if pending--; pending == 0 {
					firstRound = false
				}
			}
		case <-first.C:
			firstRound = false
		case <-rescan.C:
			if !firstRound {
				pollNew() // their answers count when they come
			}
		case <-ctx.Done():
			return count
		}
	}
}

// pollApplied asks the member at addr for its applied index until it is at
// or past index, and reports whether it is: always after the first answer,
// then once it is.
func (n *Node) pollApplied(ctx context.Context, id, addr string, index uint64, answers chan<- bool) {
	pause := time.Millisecond
	reported := false
	for {
		applied, err := n.askApplied(ctx, addr)
		done := err == nil && applied >= index
		if done || !reported {
			reported = true
			select {
			case answers <- done:
			case <-ctx.Done():
				return
			}
		}
		if done {
			return
		}
		if err != nil {
			n.log.Trace("applied index query failed", "member", id, "error", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, maxAppliedPoll)
	}
}
