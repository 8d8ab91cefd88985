package resp

// clientFlags is the flags field of CLIENT LIST and CLIENT INFO: Redis's
// letters in Redis's order (getClientInfoString), for the states a raftset
// connection can be in. O is a monitor (a replica to Redis), P subscribed,
// x in MULTI, t tracking, R its redirection broken, B broadcast tracking,
// r READONLY, e NO-EVICT, T NO-TOUCH (Redis 7.2), N none of them.
//
// Not shown: S and M (no replication links are clients here), b and u (no
// blocking commands), U (no Unix sockets), d (a WATCHed key's change is
// found at EXEC, by comparing the key's stamp, not flagged when it
// happens), c and A (the connection is gone before another one could list
// it).
func (c *client) clientFlags() string {
	var f []byte
	if c.modes.monitor.Load() {
		f = append(f, 'O')
	}
	if c.nsubs.Load()+c.npsubs.Load() > 0 {
		f = append(f, 'P')
	}
	if c.multiLen.Load() >= 0 {
		f = append(f, 'x')
	}
	t := &c.s.trk
	t.mu.Lock()
	on, broken, bcast := c.trk.on, c.trk.broken, c.trk.bcast
	t.mu.Unlock()
	if on {
		f = append(f, 't')
		if broken {
			f = append(f, 'R')
		}
		if bcast {
			f = append(f, 'B')
		}
	}
	if c.readonly.Load() {
		f = append(f, 'r')
	}
	if c.modes.noEvict.Load() {
		f = append(f, 'e')
	}
	if c.modes.noTouch.Load() {
		f = append(f, 'T')
	}
	if len(f) == 0 {
		return "N"
	}
	return string(f)
}
