package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"raftset/cluster"
	"raftset/fsm"
)

const digestUsage = `usage: raftset digest --dir DIR [--index I]
       raftset digest FILE

--dir   DEBUG DIGEST of a STOPPED node's state at log index I (default: the
        last entry of its log), rebuilt as the node rebuilds it: its newest
        snapshot at or before I, then its log entries up to I. Nothing in DIR
        changes. With the index a backup reports (raftset backup, or
        raftset rdb check on a redis-cli --rdb file), it must equal the
        backup's digest.
FILE    DEBUG DIGEST of an RDB file (a backup, or a Redis dump), with every
        key it holds, as a cluster that restored it would answer.
`

func runDigest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raftset digest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, digestUsage) }
	dir := fs.String("dir", "", "a stopped node's data directory")
	index := fs.Uint64("index", 0, "the log index (default: the node's last)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case *dir != "" && fs.NArg() == 0:
		f := fsm.New(fsm.Config{})
		res, err := cluster.Replay(cluster.ReplayOptions{DataDir: *dir, Index: *index, FSM: f})
		if err != nil {
			fmt.Fprintf(stderr, "raftset digest: %v\n", err)
			return 1
		}
		from := "the log from its start"
		if res.SnapshotIndex > 0 {
			from = fmt.Sprintf("snapshot %d", res.SnapshotIndex)
		}
		fmt.Fprintf(stdout, "%s index %d term %d (%s + %d log entries; the log holds %d-%d)\n",
			stateDigest(f), res.Index, res.Term, from, res.Entries, res.FirstIndex, res.LastIndex)
		return 0
	case *dir == "" && *index == 0 && fs.NArg() == 1:
		file, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "raftset digest: %v\n", err)
			return 1
		}
		defer file.Close()
		f := fsm.New(fsm.Config{})
		// NowMs 0: no key is dropped as expired, as DEBUG DIGEST on a
		// cluster counts keys whose deadline passed until they are deleted.
		keys, err := f.LoadRDB(bufio.NewReaderSize(file, 256<<10), fsm.LoadOptions{})
		if err != nil {
			fmt.Fprintf(stderr, "raftset digest: %s: %v\n", fs.Arg(0), err)
			return 1
		}
		res, err := verifyRDB(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "raftset digest: %s: %v\n", fs.Arg(0), err)
			return 1
		}
		if res.index == "?" {
			fmt.Fprintf(stdout, "%s (%s: %d keys; no raftset-index: not written by raftset)\n", stateDigest(f), fs.Arg(0), keys)
			return 0
		}
		fmt.Fprintf(stdout, "%s index %s term %s (%s: %d keys)\n", stateDigest(f), res.index, res.term, fs.Arg(0), keys)
		return 0
	}
	fs.Usage()
	return 2
}

// stateDigest is the state's DEBUG DIGEST, as the hex string redis-cli shows.
func stateDigest(f *fsm.FSM) string {
	r := string(f.Read([][]byte{[]byte("DEBUG"), []byte("DIGEST")}, 0, nil, nil))
	return strings.TrimSuffix(strings.TrimPrefix(r, "+"), "\r\n") // a status reply, as Redis sends it
}
