// Command raftset runs a raftset node, or works on RDB files.
//
//	raftset [server] [config-file] [--name value ...]   run a node (the default)
//	raftset rdb check|dump [--db N] FILE                 inspect an RDB file
//	raftset healthcheck [--addr host:port] [--writable]  probe a node (docker HEALTHCHECK)
//	raftset cert ca|node|client ...                      make TLS certificates for a cluster
//	raftset backup|restore [--addr host:port] FILE       a cluster's state to or from an RDB file
//	raftset recover --dir DIR [--peers ...]              a lone survivor of a lost quorum becomes a cluster
//	raftset digest --dir DIR [--index I] | FILE          DEBUG DIGEST of a stopped node at an index, or of a file
//	raftset config-doc [markdown|conf]                   print the directives (docs/configuration.md)
//	raftset version
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is raftset's release; reported by INFO as raftset_version. Between
// releases it is the next one with -dev (RELEASES.md).
const version = "0.5.0-dev"

// commit is the git commit, when the build sets it with
// -ldflags "-X main.commit=..." (the Makefile does): go build records the
// commit by itself only in a plain clone (-buildvcs does not recognise a
// git worktree) and not under go run or go test.
var commit string

// buildCommit is the git commit the binary was built from, with "-dirty"
// when the tree had changes, or "unknown".
func buildCommit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// versionLine is what --version prints.
func versionLine() string {
	return fmt.Sprintf("raftset %s commit=%s go=%s %s/%s\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "rdb":
			return runRDB(args[1:], stdout, stderr)
		case "healthcheck":
			return runHealthcheck(args[1:], stdout, stderr)
		case "cert":
			return runCert(args[1:], stdout, stderr)
		case "backup":
			return runBackup(args[1:], stdout, stderr)
		case "restore":
			return runRestore(args[1:], stdout, stderr)
		case "recover":
			return runRecover(args[1:], stdout, stderr)
		case "digest":
			return runDigest(args[1:], stdout, stderr)
		case "cluster":
			return runCluster(args[1:], stdout, stderr)
		case "version", "--version", "-v":
			fmt.Fprint(stdout, versionLine())
			return 0
		case "help", "--help", "-h":
			fmt.Fprint(stdout, usage+helpDirectives())
			return 0
		case "config-doc":
			return runConfigDoc(args[1:], stdout, stderr)
		case "server":
			args = args[1:]
		}
	}
	cfg, err := LoadConfig(args)
	if err != nil {
		fmt.Fprintf(stderr, "raftset: %v\n", err)
		return 2
	}
	if cfg.PprofAddr == "" && !strings.Contains(os.Getenv("GODEBUG"), "memprofilerate") {
		// Nothing can read the heap profile without pprof-addr, and its
		// sampled stacks stay in RSS (about 0.9 MB after a string workload,
		// 2-3% of its RSS at rest with 100,000 keys; docs/benchmarks.md, "Strings
		// and expiry").
		runtime.MemProfileRate = 0
	}
	applyGCPercent(cfg.GCPercent)
	applyGCFollowLive(cfg.GCFollowLive)
	if err := serve(cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "raftset: %v\n", err)
		return 1
	}
	return 0
}

const usage = `usage:
  raftset [server] [config-file] [--name value ...]   run a node (single node by default)
  raftset rdb check [--db N] FILE                      verify an RDB file, print its summary
  raftset rdb dump  [--db N] FILE                      print every key as one JSON object per line
  raftset healthcheck [--addr host:port] [--writable]  exit 0 if the node answers (and knows a leader)
  raftset cert ca [--dir certs]                        make a cluster CA (ca.crt, ca.key)
  raftset cert node NAME [--ip A,B] [--dns X,Y]        make a node certificate signed by it
  raftset cert client NAME                             make a client certificate (tls-auth-clients)
  raftset backup [--addr host:port] [--pass P] FILE    fetch a consistent RDB backup (SYNC), verified
  raftset restore [--addr host:port] [--pass P] FILE   replace the cluster's state with an RDB file
  raftset recover --dir DIR [--peers id=addr,...]      rewrite a stopped survivor's membership (lost quorum)
  raftset digest --dir DIR [--index I]                 DEBUG DIGEST of a stopped node's state at a log index
  raftset digest FILE                                  DEBUG DIGEST of an RDB file (a backup)
  raftset cluster create --shards S --replicas R ID@HOST:PORT ...   lay out a sharded cluster: its directives
  raftset cluster move-slots [--addr host:port] FIRST LAST SHARD   move hash slots to another shard, online
  raftset cluster rebalance [--leaders] [--dry-run] [--addr h:p]   even out slots per shard, or shard leaders
  raftset config-doc [markdown|conf]                   print the directives as docs/configuration.md or a config file
  raftset version                                      print the version, git commit and Go version
`
