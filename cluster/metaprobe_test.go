package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// probeCluster is three hosts of one shard whose directive gives every
// member's client address (as raftset cluster create writes it), so that a
// process started on an empty directory can ask the others about the
// metadata group. started says which to start now.
type probeCluster struct {
	m     *ShardMap
	cfgs  []Config
	hosts []*Host
	stops []func()
}

func newProbeCluster(t *testing.T, started ...bool) *probeCluster {
	t.Helper()
	var peers []Peer
	var members []string
	clients := make([]string, 3)
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		peers = append(peers, Peer{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
		clients[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		members = append(members, id+"@"+clients[i])
	}
	m, err := ParseShardMap("0:0-16383:" + strings.Join(members, ","))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	c := &probeCluster{m: m, cfgs: make([]Config, 3), hosts: make([]*Host, 3), stops: make([]func(), 3)}
	for i, p := range peers {
		c.cfgs[i] = hostConfig(t, p.ID, filepath.Join(root, p.ID), p.Addr, peers)
		c.cfgs[i].ClientAddr = clients[i]
		if started[i] {
			c.hosts[i], c.stops[i] = restartableHost(t, c.cfgs[i], m)
		}
	}
	return c
}

// wipe stops host i and deletes its directory, as a lost disk.
func (c *probeCluster) wipe(t *testing.T, i int) {
	t.Helper()
	c.stops[i]()
	if err := os.RemoveAll(c.cfgs[i].DataDir); err != nil {
		t.Fatal(err)
	}
}

// waitSeen waits until every running metadata replica of the hosts holds
// the client address each of ids published: the group's state says their
// replicas followed a leader.
func waitSeen(t *testing.T, hosts []*Host, ids ...string) {
	t.Helper()
	for _, h := range hosts {
		testutil.WaitFor(t, 30*time.Second, h.self+"'s metadata replica to hold the addresses of "+strings.Join(ids, ","), func() bool {
			meta := h.MetaNode()
			return meta != nil && !slices.ContainsFunc(ids, func(id string) bool { return meta.ClientAddr(id) == "" })
		})
	}
}

// TestWipedMetaVoterDoesNotBootstrap: a metadata voter whose directory was
// wiped restarts while the group lives. Started under its old id on the
// empty directory, the directive makes it a member of the first shard,
// which bootstrapped the group; it asks the others first and refuses to
// start, byte for byte, both alone and when two voters (a majority of the
// directive's configuration, which without the probe bootstrap a second
// group with a map of its own) restart at once; no dir/meta is created.
// A voter the map no longer names (REMOVEMETA), wiped with its marker,
// starts with no replica and routes by the live group's map.
func TestWipedMetaVoterDoesNotBootstrap(t *testing.T) {
	c := newProbeCluster(t, true, true, true)
	for _, h := range c.hosts {
		testutil.WaitFor(t, 30*time.Second, h.self+" to learn the map", func() bool { return h.Map().Epoch >= 1 })
	}
	waitSeen(t, c.hosts, "n1", "n2", "n3")
	n1 := c.hosts[0]

	// n3 leaves the group, then loses its disk (marker and all).
	if r := adminRetry(t, n1, "raft.shard", "removemeta", "n3"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD REMOVEMETA n3 = %q", r)
	}
	waitMetaState(t, c.hosts, []string{"n1", "n2"})
	epoch := n1.Map().Epoch
	c.wipe(t, 2)
	n3, _ := restartableHost(t, c.cfgs[2], c.m)
	if n3.MetaNode() != nil {
		t.Errorf("n3, no voter in the map, started a metadata replica on its empty directory")
	}
	testutil.WaitFor(t, 30*time.Second, "n3 to learn the live group's map", func() bool { return n3.Map().Epoch == epoch })
	if _, err := os.Stat(filepath.Join(MetaDir(c.cfgs[2].DataDir), raftDBFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("n3's dir/meta/%s: %v, want none", raftDBFile, err)
	}

	// n2, a voter, loses its disk: refused, the live group untouched.
	c.wipe(t, 1)
	want := "cluster: metadata group: the metadata group exists and counts this node a voter that held its state, which dir/meta no longer has " +
		"(node n1's replica says so; n1 answered the map at epoch " + fmt.Sprint(epoch) + "): bootstrapping here would form a second group. " +
		"Start this process under a new node id (raftset cluster add-node, then add-meta) and remove-meta n2; or, if the group lost its majority, " +
		"run raftset recover --meta on a surviving voter (docs/operations.md)"
	if h, err := NewHost(c.cfgs[1], c.m, newFSM); err == nil {
		h.Close()
		t.Errorf("NewHost of n2 on its wiped directory succeeded, want it refused")
	} else if err.Error() != want {
		t.Errorf("NewHost of n2 on its wiped directory: %v\nwant %s", err, want)
	}
	for _, d := range []string{MetaDir(c.cfgs[1].DataDir), c.cfgs[1].DataDir} {
		if _, err := os.Stat(filepath.Join(d, raftDBFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/%s after the refusal: %v, want none (nothing started)", d, raftDBFile, err)
		}
	}
	if got := metaConfigOf(n1); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("n1's metadata configuration = %v, want [n1 n2]", got)
	}
}

// TestWipedMetaMajorityDoesNotBootstrap: two of the directive's three
// metadata voters lose their disks and restart at once, a majority of the
// directive's configuration. Each asks the survivor first and refuses to
// start. Without the probe both bootstrap the directive's configuration
// (the test fails: both NewHost calls succeed), a majority of it: here n1's
// higher term soon disrupts them and its longer log wins, but while n1 is
// slow or cut off they elect a leader and write a map of their own.
func TestWipedMetaMajorityDoesNotBootstrap(t *testing.T) {
	c := newProbeCluster(t, true, true, true)
	for _, h := range c.hosts {
		testutil.WaitFor(t, 30*time.Second, h.self+" to learn the map", func() bool { return h.Map().Epoch >= 1 })
	}
	waitSeen(t, c.hosts, "n1", "n2", "n3")
	c.wipe(t, 1)
	c.wipe(t, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var started []*Host
	for _, i := range []int{1, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := NewHost(c.cfgs[i], c.m, newFSM)
			if err == nil {
				mu.Lock()
				started = append(started, h)
				mu.Unlock()
				return
			}
			if !errors.Is(err, errMetaStateLost) {
				t.Errorf("NewHost of %s on its wiped directory: %v, want %v", c.cfgs[i].NodeID, err, errMetaStateLost)
			}
		}()
	}
	wg.Wait()
	for _, h := range started {
		t.Cleanup(func() { h.Close() })
		t.Errorf("NewHost of %s on its wiped directory succeeded, want it refused", h.self)
	}
}

// TestLateMetaVoterJoins: a member of the directive's first shard that
// starts for the first time after the others formed the metadata group
// (a late starter of a fresh cluster) finds the map, which the group's
// state says its replica never held: it does not bootstrap, and its
// replica, started without a configuration, is sent the log and holds the
// map, a voter of the group.
func TestLateMetaVoterJoins(t *testing.T) {
	c := newProbeCluster(t, true, true, false)
	for _, h := range c.hosts[:2] {
		testutil.WaitFor(t, 30*time.Second, h.self+" to learn the map", func() bool { return h.Map().Epoch >= 1 })
	}
	n3, _ := restartableHost(t, c.cfgs[2], c.m)
	if n3.MetaNode() == nil {
		t.Fatal("n3 started no metadata replica")
	}
	testutil.WaitFor(t, 30*time.Second, "n3's replica to hold the map", func() bool {
		m, err := n3.readMeta(t.Context(), true)
		return err == nil && m != nil && m.Epoch >= 1
	})
	if !n3.MetaNode().isVoter() {
		t.Errorf("n3's metadata replica is not a voter")
	}
	if got := metaConfigOf(c.hosts[0]); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("n1's metadata configuration = %v, want [n1 n2 n3]", got)
	}
}
