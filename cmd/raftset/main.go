// Command raftset runs a raftset node, or works on RDB files.
//
//	raftset [server] [config-file] [--name value ...]   run a node (the default)
//	raftset rdb check|dump [--db N] FILE                 inspect an RDB file
//	raftset healthcheck [--addr host:port] [--writable]  probe a node (docker HEALTHCHECK)
//	raftset cert ca|node|client ...                      make TLS certificates for a cluster
//	raftset backup|restore [--addr host:port] FILE       a cluster's state to or from an RDB file
//	raftset recover --dir DIR [--peers ...]              a lone survivor of a lost quorum becomes a cluster
//	raftset version
package main

import (
	"fmt"
	"io"
	"os"
)

// version is raftset's release; reported by INFO as raftset_version.
const version = "0.1.0"

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
		case "version", "--version", "-v":
			fmt.Fprintf(stdout, "raftset %s\n", version)
			return 0
		case "help", "--help", "-h":
			fmt.Fprint(stdout, usage)
			return 0
		case "server":
			args = args[1:]
		}
	}
	cfg, err := LoadConfig(args)
	if err != nil {
		fmt.Fprintf(stderr, "raftset: %v\n", err)
		return 2
	}
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
  raftset version

Directives (config file "name value", or --name value): see cmd/raftset/default.conf.
`
