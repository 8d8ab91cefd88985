package cluster

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestFetchMapPassesASilentVoter: a process outside the metadata group
// (n4) learns each new map from the voters. With the first of them (n1)
// gone in a way that does not refuse connections (a lost machine, here a
// listener on its client address that never answers), every refresh's
// time ran out on n1 and n4 never learnt a map change made through the
// other voters; it must learn it within a few refreshes.
func TestFetchMapPassesASilentVoter(t *testing.T) {
	var peers []Peer
	client := map[string]string{}
	for i := range 4 {
		id := fmt.Sprintf("n%d", i+1)
		peers = append(peers, Peer{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
		client[id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	}
	// The voters' client addresses are the map's: n4 shares no shard with
	// n1, and asks it for the map first.
	m, err := ParseShardMap(fmt.Sprintf("0:0-8191:n1@%s,n2@%s,n3@%s 1:8192-16383:n2,n3,n4", client["n1"], client["n2"], client["n3"]))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	hosts := make([]*Host, 4)
	stops := make([]func(), 4)
	for i, p := range peers {
		cfg := hostConfig(t, p.ID, filepath.Join(root, p.ID), p.Addr, peers)
		cfg.ClientAddr = client[p.ID]
		hosts[i], stops[i] = restartableHost(t, cfg, m)
	}
	n2, n4 := hosts[1], hosts[3]
	// Every host, not n4 alone: n2's epoch below is the one n4 must pass,
	// and a voter adopts the map on its own refresh.
	waitHostMaps(t, hosts, "every host to learn the map", func(m *ShardMap) bool { return m.Epoch >= 1 })

	n1Addr := hosts[0].cfg.ClientAddr
	stops[0]()
	silent, err := net.Listen("tcp", n1Addr)
	if err != nil {
		t.Fatalf("listening on n1's client address %s: %v", n1Addr, err)
	}
	defer silent.Close()
	accepted := make(chan struct{}, 100)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // held open, never answered
			accepted <- struct{}{}
		}
	}()
	select { // n4 asks the silent n1 first from now on
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("n4 did not call n1's address within 10 s")
	}

	want := n2.Map().Epoch + 1
	if n4.Map().Epoch != want-1 {
		t.Fatalf("n4's map at epoch %d, n2's at %d", n4.Map().Epoch, want-1)
	}
	if r := adminRetry(t, n2, "raft.shard", "removereplica", "1", "n3"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD REMOVEREPLICA 1 n3 = %q", r)
	}
	// A bound, not a timing: each refresh n4 runs may spend a second on
	// the silent n1 in fetchMap and another asking shard 0's members
	// (n1 first) for their leader; stuck on n1, n4 never learnt it.
	testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("n4 to learn epoch %d past the silent n1", want), func() bool {
		return n4.Map().Epoch >= want
	})
}
