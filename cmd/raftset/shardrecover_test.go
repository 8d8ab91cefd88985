package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProcessDir is a data directory with node-id n1 and an empty raft.db
// in each of the given group directories ("" is dir itself): enough for
// recover's choice of groups, which refuses before opening any.
func fakeProcessDir(t *testing.T, groups ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "node-id"), []byte("n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		d := filepath.Join(dir, g)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "raft.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRecoverRefusesGroups: raftset recover refuses, byte for byte and
// before rewriting anything, a group the directory does not hold, --shard
// on a process that is not sharded, a sharded directory without a group
// named, --meta on a process that is not a metadata voter, and --peers
// without this node.
func TestRecoverRefusesGroups(t *testing.T) {
	plain := fakeProcessDir(t, "")
	sharded := fakeProcessDir(t, "", "shards/1", "meta")
	shard1Only := fakeProcessDir(t, "shards/1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", sharded, "--shard", "2"}, sharded + " holds no shard 2 (shards 0, 1 and the metadata group)"},
		{[]string{"--dir", shard1Only, "--shard", "0"}, shard1Only + " holds no shard 0 (shard 1)"},
		{[]string{"--dir", plain, "--shard", "1"}, plain + " is not a sharded process's directory (shard 0): recover it without --shard"},
		{[]string{"--dir", sharded}, sharded + " is a sharded process's directory (shards 0, 1 and the metadata group): name the group that lost its quorum with --shard N or --meta"},
		{[]string{"--dir", shard1Only}, shard1Only + " is a sharded process's directory (shard 1): name the group that lost its quorum with --shard N or --meta"},
		{[]string{"--dir", shard1Only, "--shard", "1", "--meta"}, shard1Only + " holds no metadata group (shard 1): recover it on one of its voters, the processes of the shard-map directive's first shard"},
		{[]string{"--dir", sharded, "--shard", "x"}, `--shard "x" is not a shard id`},
		{[]string{"--dir", sharded, "--shard", "1", "--peers", "n2=127.0.0.1:1,n3=127.0.0.1:2"}, "--peers must include this node, n1"},
	} {
		var stdout, stderr strings.Builder
		code := run(append([]string{"recover"}, tc.args...), &stdout, &stderr)
		if want := "raftset recover: " + tc.want + "\n"; code != 1 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("recover %q: exit %d, stdout %q, stderr %q, want exit 1 and %q", tc.args, code, stdout.String(), stderr.String(), want)
		}
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"recover", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "--shard N") ||
		!strings.Contains(stderr.String(), "RAFT.SHARD REMOVEREPLICA") {
		t.Errorf("recover --help: exit %d, %q, want the sharded case described", code, stderr.String())
	}
}
