package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Recovering one group of a sharded process (docs/operations.md, Recover):
// every Raft group a process holds has a directory of its own under the
// process's (ShardDir, MetaDir), so Recover rewrites any one of them as it
// does a single group's; these say where they are and which a directory
// holds.

// MetaDir is the directory of the metadata group's voter under a process's
// data directory (present only on the voters: the members of the
// shard-map directive's first shard, and those RAFT.SHARD ADDMETA added;
// kept, with a marker file, by those REMOVEMETA removed).
func MetaDir(dir string) string { return filepath.Join(dir, metaDir) }

// GroupsIn lists the Raft groups whose state a process's data directory
// holds: the shards, ascending (0 when dir itself has Raft state, then
// those under dir/shards), and whether it holds a metadata voter's (not
// one that left the group).
// A directory of a process that is not sharded holds shard 0 alone.
func GroupsIn(dir string) (shards []uint32, meta bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, raftDBFile)); err == nil {
		shards = append(shards, 0)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("cluster: %w", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, shardsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("cluster: %w", err)
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || id == 0 || !e.IsDir() {
			continue // not a shard's (shard 0 is dir itself)
		}
		shards = append(shards, uint32(id))
	}
	slices.Sort(shards)
	if _, err := os.Stat(filepath.Join(MetaDir(dir), raftDBFile)); err == nil {
		// A replica that left the group (RAFT.SHARD REMOVEMETA) is not
		// started again (metavoters.go): there is nothing to recover.
		left, err := exists(filepath.Join(MetaDir(dir), metaLeftFile))
		if err != nil {
			return nil, false, err
		}
		meta = !left
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("cluster: %w", err)
	}
	return shards, meta, nil
}
