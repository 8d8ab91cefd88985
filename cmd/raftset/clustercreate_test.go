package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"raftset/cluster"
)

var composeNodes = []string{"n1@127.0.0.1:7001", "n2@127.0.0.1:7002", "n3@127.0.0.1:7003",
	"n4@127.0.0.1:7004", "n5@127.0.0.1:7005", "n6@127.0.0.1:7006"}

// TestClusterCreateMatchesCompose: the compose file's map and peers, with
// their default ports, are what `raftset cluster create --shards 2
// --replicas 3` prints for its six nodes.
func TestClusterCreateMatchesCompose(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(append([]string{"cluster", "create", "--shards", "2", "--replicas", "3"}, composeNodes...), &out, &errOut); code != 0 {
		t.Fatalf("raftset cluster create: exit %d: %s", code, errOut.String())
	}
	yml, err := os.ReadFile("../../docker-compose.shards.yml")
	if err != nil {
		t.Fatal(err)
	}
	defaults := regexp.MustCompile(`\$\{[A-Z0-9_]+:-([^}]*)\}`)
	anchor := func(name string) string {
		m := regexp.MustCompile(`(?m)^x-` + name + `: &` + name + ` "(.*)"$`).FindStringSubmatch(string(yml))
		if m == nil {
			t.Fatalf("docker-compose.shards.yml has no x-%s", name)
		}
		return defaults.ReplaceAllString(m[1], "$1")
	}
	for _, want := range []string{"peers " + anchor("peers"), `shard-map "` + anchor("map") + `"`, "cluster-enabled yes"} {
		if !containsLine(out.String(), want) {
			t.Errorf("raftset cluster create printed\n%s\nwithout the compose file's line %q", out.String(), want)
		}
	}
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// TestClusterCreateOut: --out writes a config per node that raftset loads
// as that node's: its own addresses and id, the same peers and map, and a
// map that keeps the placement rules.
func TestClusterCreateOut(t *testing.T) {
	dir := t.TempDir()
	var out, errOut strings.Builder
	args := []string{"cluster", "create", "--shards", "3", "--replicas", "3", "--out", dir,
		"n1@127.0.0.1:7001", "n2@127.0.0.1:7002", "n3@127.0.0.1:7003,127.0.0.1:27003"}
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("raftset %q: exit %d: %s", args, code, errOut.String())
	}
	var smap string
	for i, id := range []string{"n1", "n2", "n3"} {
		path := filepath.Join(dir, id+".conf")
		if !strings.Contains(out.String(), path+"\n") {
			t.Errorf("output %q does not name %s", out.String(), path)
		}
		c, err := LoadConfig([]string{path})
		if err != nil {
			t.Fatalf("LoadConfig(%s): %v", path, err)
		}
		raft := []string{"127.0.0.1:17001", "127.0.0.1:17002", "127.0.0.1:27003"}[i]
		if c.NodeID != id || c.Port != 7001+i || c.RaftAddr != raft || c.Dir != id+"-data" || c.ClusterEnabled != "yes" ||
			c.Peers != "n1=127.0.0.1:17001,n2=127.0.0.1:17002,n3=127.0.0.1:27003" {
			t.Errorf("%s: node-id %q port %d raft-addr %q dir %q cluster-enabled %q peers %q", path, c.NodeID, c.Port, c.RaftAddr, c.Dir, c.ClusterEnabled, c.Peers)
		}
		if smap == "" {
			smap = c.ShardMap
		} else if c.ShardMap != smap {
			t.Errorf("%s: shard-map %q, another node's is %q", path, c.ShardMap, smap)
		}
	}
	const want = "0:0-5460:n1@127.0.0.1:7001,n2@127.0.0.1:7002,n3@127.0.0.1:7003 " +
		"1:5461-10922:n2@127.0.0.1:7002,n1@127.0.0.1:7001,n3@127.0.0.1:7003 " +
		"2:10923-16383:n3@127.0.0.1:7003,n1@127.0.0.1:7001,n2@127.0.0.1:7002"
	if smap != want {
		t.Errorf("shard-map = %q, want %q", smap, want)
	}
	m, err := cluster.ParseShardMap(smap)
	if err != nil {
		t.Fatal(err)
	}
	if v := cluster.CheckPlacement(m, 3); len(v) > 0 {
		t.Errorf("the map breaks the placement rules: %q", v)
	}
}

// TestClusterAddNodeArgs: add-node refuses a bad command line before it
// dials any node (exit 2 and why), as create does.
func TestClusterAddNodeArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "usage: raftset cluster create"},
		{[]string{"n4@127.0.0.1:7004", "n5@127.0.0.1:7005"}, "usage: raftset cluster create"},
		{[]string{"n4"}, "raftset cluster add-node: node \"n4\": want ID@HOST:PORT[,RAFTHOST:RAFTPORT]\n"},
		{[]string{"n4@127.0.0.1"}, "raftset cluster add-node: node n4: client address \"127.0.0.1\": address 127.0.0.1: missing port in address\n"},
		{[]string{"n4@127.0.0.1:7004,nope"}, "raftset cluster add-node: node n4: Raft address \"nope\": address nope: missing port in address\n"},
	} {
		var out, errOut strings.Builder
		if code := runCluster(append([]string{"add-node", "--addr", "127.0.0.1:1"}, tc.args...), &out, &errOut); code != 2 {
			t.Errorf("add-node %q: exit %d, want 2 (stderr %q)", tc.args, code, errOut.String())
		}
		if !strings.HasPrefix(errOut.String(), tc.wantErr) || out.Len() != 0 {
			t.Errorf("add-node %q: stdout %q, stderr %q, want stderr starting %q", tc.args, out.String(), errOut.String(), tc.wantErr)
		}
	}
}

// TestClusterRemoveNodeArgs: remove-node refuses a bad command line before
// it dials any node (exit 2 and why).
func TestClusterRemoveNodeArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "usage: raftset cluster create"},
		{[]string{"n4", "n5"}, "usage: raftset cluster create"},
		{[]string{"--dry-run"}, "usage: raftset cluster create"},
		{[]string{"n4@127.0.0.1:7004"}, "raftset cluster remove-node: bad node id \"n4@127.0.0.1:7004\" (the node's id only, as in RAFT.SHARD MAP)\n"},
	} {
		var out, errOut strings.Builder
		if code := runCluster(append([]string{"remove-node", "--addr", "127.0.0.1:1"}, tc.args...), &out, &errOut); code != 2 {
			t.Errorf("remove-node %q: exit %d, want 2 (stderr %q)", tc.args, code, errOut.String())
		}
		if !strings.HasPrefix(errOut.String(), tc.wantErr) || out.Len() != 0 {
			t.Errorf("remove-node %q: stdout %q, stderr %q, want stderr starting %q", tc.args, out.String(), errOut.String(), tc.wantErr)
		}
	}
}

// TestClusterRemoveShardArgs: remove-shard refuses a bad command line
// before it dials any node (exit 2 and why).
func TestClusterRemoveShardArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "usage: raftset cluster create"},
		{[]string{"1", "2"}, "usage: raftset cluster create"},
		{[]string{"--dry-run"}, "usage: raftset cluster create"},
		{[]string{"x"}, "raftset cluster remove-shard: \"x\" is not a shard id\n"},
		{[]string{"268435455"}, "raftset cluster remove-shard: \"268435455\" is not a shard id\n"},
	} {
		var out, errOut strings.Builder
		if code := runCluster(append([]string{"remove-shard", "--addr", "127.0.0.1:1"}, tc.args...), &out, &errOut); code != 2 {
			t.Errorf("remove-shard %q: exit %d, want 2 (stderr %q)", tc.args, code, errOut.String())
		}
		if !strings.HasPrefix(errOut.String(), tc.wantErr) || out.Len() != 0 {
			t.Errorf("remove-shard %q: stdout %q, stderr %q, want stderr starting %q", tc.args, out.String(), errOut.String(), tc.wantErr)
		}
	}
}

// TestClusterMetaArgs: add-meta and remove-meta take one node id, and
// refuse what no map can name before dialling.
func TestClusterMetaArgs(t *testing.T) {
	for _, name := range []string{"add-meta", "remove-meta"} {
		for _, tc := range []struct {
			args    []string
			wantErr string
		}{
			{nil, "usage: raftset cluster create"},
			{[]string{"n1", "n2"}, "usage: raftset cluster create"},
			{[]string{"n@1"}, "raftset cluster " + name + ": bad node id \"n@1\" (the node's id only, as in RAFT.SHARD MAP)\n"},
			{[]string{""}, "raftset cluster " + name + ": bad node id \"\" (the node's id only, as in RAFT.SHARD MAP)\n"},
		} {
			var out, errOut strings.Builder
			if code := runCluster(append([]string{name, "--addr", "127.0.0.1:1"}, tc.args...), &out, &errOut); code != 2 {
				t.Errorf("%s %q: exit %d, want 2 (stderr %q)", name, tc.args, code, errOut.String())
			}
			if !strings.HasPrefix(errOut.String(), tc.wantErr) || out.Len() != 0 {
				t.Errorf("%s %q: stdout %q, stderr %q, want stderr starting %q", name, tc.args, out.String(), errOut.String(), tc.wantErr)
			}
		}
	}
}
