package resp

import (
	"strconv"

	"raftset/internal/command"
	"raftset/internal/slot"
)

// Cluster mode (Config.Mode "cluster", the cluster-enabled directive): the
// Redis Cluster protocol as a cluster-aware client expects it
// (docs/sharding.md). With it off, raftset is a standalone server to its
// clients, as Redis is: CLUSTER answers Redis's "cluster support disabled"
// and keys may span slots.
//
// With it on, before a command with keys runs (or is queued in MULTI), its
// keys must hash to one slot (-CROSSSLOT, as Redis's getNodeByQuery), and
// the slot must be served here: otherwise the client is sent to the node
// that serves it with -MOVED, except a read on a READONLY connection, which
// a replica serves itself. EXEC checks the queued commands together.

const (
	errClusterDisabled = "ERR This instance has cluster support disabled"
	errCrossSlot       = "CROSSSLOT Keys in request don't hash to the same slot"
)

// SlotRouter is implemented by a Store that knows where hash slots are
// served (cluster.Node). A Store without it serves every slot here.
type SlotRouter interface {
	// RouteSlot returns whether slot s is served by this node and, if not,
	// the client address of the node that serves it.
	RouteSlot(s int) (addr string, here bool)
}

func (s *Server) clusterEnabled() bool { return s.cfg.Mode == "cluster" }

// cmdCluster answers CLUSTER KEYSLOT here and passes the other
// subcommands to the store.
func (c *client) cmdCluster(dst []byte, spec *command.Spec, args [][]byte) []byte {
	if !c.s.clusterEnabled() {
		return command.AppendError(dst, errClusterDisabled)
	}
	if spec.Name == "cluster|keyslot" {
		return command.AppendInt(dst, int64(slot.Of(args[2])))
	}
	return append(dst, c.s.store.Admin(c.s.ctx, args)...)
}

// cmdAsking answers ASKING. No slot migrates yet, so nothing sends -ASK and
// the flag it would set (serve one command on an importing slot) has nothing
// to act on: it is accepted, as Redis accepts it, for clients that send it.
func (c *client) cmdAsking(dst []byte) []byte {
	if !c.s.clusterEnabled() {
		return command.AppendError(dst, errClusterDisabled)
	}
	return append(dst, command.OK...)
}

// clusterRedirect returns the error that keeps a command from running on
// this node in cluster mode (CROSSSLOT or MOVED), or "". EXEC is checked
// over its queued commands.
func (c *client) clusterRedirect(spec *command.Spec, args [][]byte) string {
	first, write := -1, false
	check := func(spec *command.Spec, args [][]byte) bool {
		pos, _, ok := spec.FindKeys(args)
		if !ok || len(pos) == 0 {
			return true
		}
		for _, p := range pos {
			sl := slot.Of(args[p])
			if first >= 0 && sl != first {
				return false
			}
			first = sl
		}
		if !spec.Has(command.ReadOnly) && !noWritesEval(spec, args) {
			write = true
		}
		return true
	}
	if spec.Name == "exec" {
		for _, q := range c.queue {
			if !check(q.spec, q.args) {
				return errCrossSlot
			}
		}
	} else if !check(spec, args) {
		return errCrossSlot
	}
	if first < 0 {
		return ""
	}
	r, ok := c.s.store.(SlotRouter)
	if !ok {
		return ""
	}
	if addr, here := r.RouteSlot(first); !here && (write || !c.stale) {
		return "MOVED " + strconv.Itoa(first) + " " + addr
	}
	return ""
}

// clusterSection is INFO's "# Cluster", as Redis's.
func (s *Server) clusterSection() InfoSection {
	on := "0"
	if s.clusterEnabled() {
		on = "1"
	}
	return InfoSection{Name: "Cluster", Fields: [][2]string{{"cluster_enabled", on}}}
}
