package resp

import (
	"bytes"

	"raftset/internal/command"
)

const (
	errShutdownFailed = "ERR Errors trying to SHUTDOWN. Check logs."
	errNoShutdown     = "ERR No shutdown in progress."
)

// cmdShutdown answers SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT] as Redis
// 7 does, with raftset's meaning of saving: every acknowledged write is
// already in the Raft log, so the default (and NOSAVE) shuts down at once,
// as SIGTERM does; SAVE first takes a Raft snapshot, so that the next start
// restores it instead of replaying the log. FORCE shuts down even when that
// snapshot fails. NOW is accepted: no shutdown ever waits (for lagging
// replicas, in Redis), so there is never one in progress to ABORT.
//
// On success the connection gets no reply: it is closed, and Config.Shutdown
// stops the process the way SIGTERM does. Only this node stops; the other
// members of a cluster carry on.
func (c *client) cmdShutdown(args [][]byte) {
	var save, nosave, now, force, abort bool
	for _, a := range args[1:] {
		switch {
		case bytes.EqualFold(a, []byte("nosave")):
			nosave = true
		case bytes.EqualFold(a, []byte("save")):
			save = true
		case bytes.EqualFold(a, []byte("now")):
			now = true
		case bytes.EqualFold(a, []byte("force")):
			force = true
		case bytes.EqualFold(a, []byte("abort")):
			abort = true
		default:
			c.reply(command.Error(command.ErrSyntax))
			return
		}
	}
	if (abort && (save || nosave || now || force)) || (save && nosave) {
		c.reply(command.Error(command.ErrSyntax))
		return
	}
	if abort {
		c.reply(command.Error(errNoShutdown))
		return
	}
	s := c.s
	if s.cfg.Shutdown == nil {
		s.log.Error("SHUTDOWN refused: this server has no way to stop its process")
		c.reply(command.Error(errShutdownFailed))
		return
	}
	if save {
		if r := s.store.Admin(s.ctx, [][]byte{[]byte("save")}); command.IsError(r) {
			s.log.Error("SHUTDOWN SAVE: snapshot failed", "reply", string(bytes.TrimSpace(r)), "force", force)
			if !force {
				c.reply(command.Error(errShutdownFailed))
				return
			}
		}
	}
	s.log.Info("SHUTDOWN requested", "addr", c.addr, "save", save, "now", now, "force", force)
	// Ask first, then close: a client that sees the connection close knows
	// the shutdown is under way.
	s.cfg.Shutdown()
	c.quit = true
	_ = c.rc.Close()
}
