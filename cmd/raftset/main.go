package main

import (
	"fmt"
	"os"
)

// Placeholder until the real entry point lands: it only dispatches
// `raftset rdb ...`.
func main() {
	if len(os.Args) > 1 && os.Args[1] == "rdb" {
		os.Exit(runRDB(os.Args[2:], os.Stdout, os.Stderr))
	}
	fmt.Fprintln(os.Stderr, "usage: raftset rdb check|dump [--db N] FILE")
	os.Exit(2)
}
