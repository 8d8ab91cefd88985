package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"raftset/fsm"
)

// RecoverOptions say how Recover rewrites a stopped node's configuration.
type RecoverOptions struct {
	// DataDir is the stopped node's directory.
	DataDir string
	// NodeID is the node's id.
	NodeID string
	// Peers are the members of the recovered cluster, every one a voter.
	// Empty means this node alone, at the Raft address the old
	// configuration gives it.
	Peers []Peer
	// FSM replays the node's snapshot and log (its state is then thrown
	// away); its limits should be the node's.
	FSM    *fsm.FSM
	Logger hclog.Logger
}

// Recover rewrites the Raft configuration of a stopped node so that it
// starts as a cluster of opts.Peers with every entry it had, committed or
// not, as hashicorp/raft's RecoverCluster does: the latest snapshot is
// restored, every later log entry applied, and the result written as a new
// snapshot that carries the new configuration; the log is then emptied. It
// is the way back from a lost quorum, and it is unsafe on a node whose
// cluster still has a quorum (two clusters would then accept writes). It
// returns the configuration found and the one written, as
// "id=addr (suffrage), ...".
func Recover(opts RecoverOptions) (before, after string, err error) {
	old, recovered, err := recoverCluster(opts)
	return formatServers(old), formatServers(recovered), err
}

func formatServers(c raft.Configuration) string {
	var parts []string
	for _, s := range c.Servers {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", s.ID, s.Address, strings.ToLower(s.Suffrage.String())))
	}
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, ", ")
}

func recoverCluster(opts RecoverOptions) (old, recovered raft.Configuration, err error) {
	if opts.FSM == nil || opts.NodeID == "" {
		return old, recovered, errors.New("recover: a node id and a state machine are needed")
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	db := filepath.Join(opts.DataDir, raftDBFile)
	if _, err := os.Stat(db); err != nil {
		return old, recovered, fmt.Errorf("recover: %s: %w (is --dir the node's data directory?)", db, err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path: db,
		BoltOptions: &bbolt.Options{
			Timeout:        time.Second, // a running node holds the file
			NoFreelistSync: true,
			FreelistType:   bbolt.FreelistMapType,
		},
	})
	if err != nil {
		return old, recovered, fmt.Errorf("recover: open %s: %w (stop the node first)", db, err)
	}
	defer bolt.Close()
	// The log stays where it is: recovery migrates nothing.
	kind, err := logStoreOf(opts.DataDir)
	if err != nil {
		return old, recovered, fmt.Errorf("recover: %w", err)
	}
	logs, closer, err := openLogStore(opts.DataDir, kind, bolt, logger)
	if err != nil {
		return old, recovered, fmt.Errorf("recover: %w", err)
	}
	if closer != nil {
		defer closer.Close()
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(opts.DataDir, 1, logger.Named("snapshot"))
	if err != nil {
		return old, recovered, fmt.Errorf("recover: snapshot store: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(opts.NodeID)
	rc.Logger = logger.Named("raft")
	rc.NoSnapshotRestoreOnStart = true

	// The configuration as the node would start with it (GetConfiguration
	// runs nothing, it only reads the stores).
	_, trans := raft.NewInmemTransport("")
	old, err = raft.GetConfiguration(rc, newMetaFSM(fsm.New(fsm.Config{Logger: logger})), logs, bolt, snaps, trans)
	if err != nil {
		return old, recovered, fmt.Errorf("recover: read the configuration: %w", err)
	}
	if len(opts.Peers) == 0 {
		var self raft.ServerAddress
		for _, s := range old.Servers {
			if s.ID == rc.LocalID {
				self = s.Address
			}
		}
		if self == "" {
			return old, recovered, fmt.Errorf("recover: node %q is not in its own configuration; give --peers", opts.NodeID)
		}
		opts.Peers = []Peer{{ID: opts.NodeID, Addr: string(self)}}
	}
	self := false
	for _, p := range opts.Peers {
		recovered.Servers = append(recovered.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr),
		})
		self = self || p.ID == opts.NodeID
	}
	if !self {
		return old, recovered, fmt.Errorf("recover: node %q must be one of the peers", opts.NodeID)
	}

	rc = raft.DefaultConfig()
	rc.LocalID = raft.ServerID(opts.NodeID)
	rc.Logger = logger.Named("raft")
	if err := raft.RecoverCluster(rc, newMetaFSM(opts.FSM), logs, bolt, snaps, trans, recovered); err != nil {
		return old, recovered, fmt.Errorf("recover: %w", err)
	}
	if err := opts.FSM.HaltErr(); err != nil {
		// Not reached in practice: a state machine that stopped at an entry
		// it cannot decode refuses the snapshot, so RecoverCluster fails
		// before it touches the stores.
		return old, recovered, fmt.Errorf("recover: replaying the log stopped: %w", err)
	}
	return old, recovered, nil
}
