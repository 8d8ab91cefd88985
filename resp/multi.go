package resp

import (
	"bytes"

	"raftset/internal/command"
)

var (
	errNested       = "ERR MULTI calls can not be nested"
	errWatchInMulti = "ERR WATCH inside MULTI is not allowed"
	errNotInMulti   = "ERR Command not allowed inside a transaction"
)

// queuedAnyway are the NoMulti commands that MULTI runs rather than
// refuses: the ACL checks them first, as Redis checks every command.
func queuedAnyway(name string) bool {
	switch name {
	case "multi", "exec", "discard", "watch", "quit":
		return true
	}
	return false
}

// queueCommand handles a command sent between MULTI and EXEC.
func (c *client) queueCommand(spec *command.Spec, args [][]byte) {
	switch spec.Name {
	case "multi":
		c.scratch = command.AppendError(c.scratch[:0], errNested)
		c.reply(c.scratch)
		return
	case "watch":
		c.scratch = command.AppendError(c.scratch[:0], errWatchInMulti)
		c.reply(c.scratch)
		return
	case "exec":
		c.exec()
		return
	case "discard":
		c.endMulti()
		c.reply(command.OK)
		return
	case "quit", "reset":
		c.local(spec, args)
		return
	case "unwatch":
		// Queued, as Redis does; it answers +OK inside EXEC's reply.
	default:
		if spec.Has(command.NoMulti) {
			c.reject(errNotInMulti)
			return
		}
	}
	c.queue = append(c.queue, queued{spec: spec, args: args})
	c.multiLen.Store(int32(len(c.queue)))
	c.reply(command.Queued)
}

// endMulti leaves MULTI and forgets the watched keys, as Redis's
// discardTransaction does.
func (c *client) endMulti() {
	clear(c.queue)
	c.inMulti, c.dirty, c.queue, c.watches = false, false, c.queue[:0], nil
	c.multiLen.Store(-1)
}

// exec answers EXEC: the queued commands go to the store as one transaction
// op (with the watched stamps), which joins the pending write batch.
// Connection and node commands are answered now and travel as pre-decided
// replies, so that their replies take their place in EXEC's array.
func (c *client) exec() {
	switch {
	case !c.inMulti:
		c.scratch = command.AppendError(c.scratch[:0], "ERR EXEC without MULTI")
		c.reply(c.scratch)
		return
	case c.dirty:
		c.endMulti()
		c.scratch = command.AppendError(c.scratch[:0], command.ErrExecAbort)
		c.reply(c.scratch)
		return
	}
	data := 0
	for _, q := range c.queue {
		if q.spec.Has(command.Write) || q.spec.Has(command.ReadOnly) {
			data++
		}
	}
	if data < len(c.queue) {
		// Local commands may read what earlier writes did (INFO keyspace).
		c.flush()
	}
	tx := &command.Tx{Watches: c.watches, Ops: make([]command.Op, len(c.queue))}
	for i, q := range c.queue {
		if denied := c.aclRecheck(q.spec, q.args); denied != nil {
			tx.Ops[i] = command.Op{Kind: command.OpReply, Reply: denied}
			continue
		}
		if q.spec.Has(command.Write) || q.spec.Has(command.ReadOnly) {
			tx.Ops[i] = command.Op{Kind: command.OpCommand, Args: q.args}
			continue
		}
		var reply []byte
		if q.spec.Name == "unwatch" {
			reply = command.OK
		} else {
			reply = c.runLocal(nil, q.spec, q.args)
		}
		tx.Ops[i] = command.Op{Kind: command.OpReply, Reply: reply}
	}
	if c.r3.special {
		c.r3.cur = c.txShape()
	}
	c.watches = nil
	c.endMulti()
	if data == 0 && len(tx.Watches) == 0 {
		// Nothing for the store to decide.
		c.scratch = command.AppendArray(c.scratch[:0], len(tx.Ops))
		for _, op := range tx.Ops {
			c.scratch = append(c.scratch, op.Reply...)
		}
		c.reply(c.scratch)
		return
	}
	c.pendWrite(command.Op{Kind: command.OpTx, Tx: tx}, nil)
}

// cmdWatch asks the store for the keys' stamps. A key watched already keeps
// its first stamp, as in Redis.
func (c *client) cmdWatch(dst []byte, args [][]byte) []byte {
	watches, errReply := c.s.store.Watch(c.s.ctx, args[1:])
	if errReply != nil {
		return append(dst, errReply...)
	}
	for _, w := range watches {
		dup := false
		for _, old := range c.watches {
			if bytes.Equal(old.Key, w.Key) {
				dup = true
				break
			}
		}
		if !dup {
			c.watches = append(c.watches, w)
		}
	}
	return append(dst, command.OK...)
}
