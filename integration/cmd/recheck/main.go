// Command recheck checks a saved Jepsen-suite history again:
//
//	go run ./integration/cmd/recheck [-timeout 2m] [-clock-offset d] [-ignore-restore] ARTIFACT-DIR
//
// It reads ARTIFACT-DIR/history.jsonl, runs every checker that applies
// (porcupine over the per-key sets and the TTL keys, the set and queue
// checks against the final reads recorded in the history), prints the
// report as JSON and writes porcupine's visualisation next to the history
// (recheck-linearizability.html, recheck-ttl.html) for a history that is
// not linearizable; for an Illegal TTL history it also prints each
// illegal key's minimal illegal sub-history (check.FindTTLCulprits) to
// stderr, and the report holds it as ttl_culprits. -clock-offset replaces the clock offsets recorded in
// the history for the TTL check (to see what a tighter model would say).
// A history with a backup restored into it (keys cas: too) is checked with
// the restore point; -ignore-restore checks it as if there were none.
// Exit status: 0 valid, 1 anomalies found, 2 usage or I/O error.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"raftset/integration/check"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("recheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Minute, "porcupine's time limit per check (0: none)")
	offset := fs.String("clock-offset", "", "check TTL keys as if one node's clock had this offset instead of the recorded ones")
	ignoreRestore := fs.Bool("ignore-restore", false, "check as if the history had no backup and no restore")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: recheck [-timeout d] [-clock-offset d] [-ignore-restore] ARTIFACT-DIR")
		return 2
	}
	var opts []check.RecheckOption
	if *offset != "" {
		d, err := time.ParseDuration(*offset)
		if err != nil {
			fmt.Fprintf(stderr, "recheck: -clock-offset %q: %v\n", *offset, err)
			return 2
		}
		opts = append(opts, check.WithClockBounds(check.BoundsFor(d)))
	}
	if *ignoreRestore {
		opts = append(opts, check.IgnoringRestore())
	}
	rep, err := check.Recheck(fs.Arg(0), *timeout, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "recheck: %v\n", err)
		return 2
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	if !rep.Valid {
		for _, p := range rep.Problems {
			fmt.Fprintf(stderr, "recheck: %s\n", p)
		}
		if rep.TTLCulprits != nil {
			for _, l := range rep.TTLCulprits.Lines() {
				fmt.Fprintf(stderr, "recheck: %s\n", l)
			}
		}
		return 1
	}
	return 0
}
