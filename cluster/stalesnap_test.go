package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// A node that has applied and compacted past a snapshot must not install
// it when a leader of its term sends it (the Jepsen suite's
// remove-isolated-snapshot-5: Raft rolled the state back and then panicked
// on "log not found").
func TestStaleInstallSnapshotIsRefused(t *testing.T) {
	addr, trans := raft.NewInmemTransport("n1")
	_, sender := raft.NewInmemTransport("old-leader")
	sender.Connect(addr, trans)
	cfg := fastConfig(t, "n1")
	cfg.Transport = trans
	cfg.TrailingLogs = 4
	cfg.SnapshotLogBytes, cfg.TrailingLogBytes = -1, -1
	n := mustNode(t, cfg, newFakeFSM(), true)
	ctx := context.Background()
	writeN := func(from, to int) {
		for i := from; i < to; i++ {
			if got := n.Write(ctx, []command.Op{cmd("sadd", "s", fmt.Sprint(i))}); string(got[0]) != ":1\r\n" {
				t.Fatalf("write %d: %q", i, got[0])
			}
		}
	}

	writeN(0, 20)
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	old, data := latestSnapshot(t, n)
	writeN(20, 40)
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if first, _ := n.logs.FirstIndex(); first <= old.Index {
		t.Fatalf("log still starts at %d, want it compacted past the old snapshot's %d", first, old.Index)
	}

	req := &raft.InstallSnapshotRequest{
		RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("old-leader"), Addr: []byte("old-leader")},
		SnapshotVersion:    old.Version,
		Term:               n.raft.CurrentTerm(),
		LastLogIndex:       old.Index,
		LastLogTerm:        old.Term,
		Configuration:      raft.EncodeConfiguration(old.Configuration),
		ConfigurationIndex: old.ConfigurationIndex,
		Size:               int64(len(data)),
	}
	var resp raft.InstallSnapshotResponse
	err := sender.InstallSnapshot("n1", addr, req, &resp, bytes.NewReader(data))
	if err == nil || resp.Success {
		t.Fatalf("stale InstallSnapshot at index %d: success=%v err=%v, want it refused", old.Index, resp.Success, err)
	}

	// The state and the log go on from where they were.
	if got := string(n.Read(ctx, args("scard", "s"), false)); got != ":40\r\n" {
		t.Fatalf("SCARD after the refused install = %q, want :40", got)
	}
	writeN(40, 45)
	if got := string(n.Read(ctx, args("scard", "s"), false)); got != ":45\r\n" {
		t.Fatalf("SCARD after more writes = %q, want :45", got)
	}
}

// latestSnapshot returns the metadata and bytes of the node's newest snapshot.
func latestSnapshot(t *testing.T, n *Node) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	list, err := n.snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("snapshots: %v (%d)", err, len(list))
	}
	meta, rc, err := n.snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return meta, data
}
