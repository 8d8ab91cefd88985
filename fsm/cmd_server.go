package fsm

import (
	"encoding/hex"
	"strings"

	"raftset/internal/command"
	"raftset/internal/setenc"
)

// Server-level commands: FLUSHALL/FLUSHDB, the replicated "config set" of
// the set-max-* limits, DEBUG DIGEST and DIGEST-VALUE, and PING/ECHO (which
// can sit inside a transaction).

func prepareFlush(args [][]byte, _ int64) ([][]byte, string) {
	if len(args) > 2 || (len(args) == 2 && !eqFold(args[1], "sync") && !eqFold(args[1], "async")) {
		return nil, command.ErrSyntax
	}
	return args[:1], ""
}

func cmdFlush(c *execCtx, args [][]byte) {
	if _, msg := prepareFlush(args, 0); msg != "" {
		c.err(msg)
		return
	}
	c.ks.clear()
	c.ks.lastDel = c.index
	if c.rec != nil {
		c.rec.flushed = true
	}
	c.ok()
}

// configParams are the replicated parameters "config set" may change.
var configParams = []struct {
	name string
	set  func(l *setenc.Limits, v int)
}{
	{"set-max-intset-entries", func(l *setenc.Limits, v int) { l.MaxIntsetEntries = v }},
	{"set-max-listpack-entries", func(l *setenc.Limits, v int) { l.MaxListpackEntries = v }},
	{"set-max-listpack-value", func(l *setenc.Limits, v int) { l.MaxListpackValue = v }},
}

// parseConfigSet checks "config set name value [name value ...]" and
// returns the limits and maxmemory settings it would produce from lim and ev.
func parseConfigSet(args [][]byte, lim setenc.Limits, ev EvictConfig) (setenc.Limits, EvictConfig, string) {
	if !eqFold(args[1], "set") {
		return lim, ev, "ERR unknown subcommand '" + string(args[1]) + "'. Try CONFIG HELP."
	}
	if len(args) < 4 || len(args)%2 != 0 {
		return lim, ev, command.ErrArity("config|set")
	}
	for i := 2; i < len(args); i += 2 {
		name := args[i]
		if ok, msg := ev.setParam(string(name), string(args[i+1])); ok {
			if msg != "" {
				return lim, ev, "ERR CONFIG SET failed (possibly related to argument '" + strings.ToLower(string(name)) + "') - " + msg
			}
			continue
		}
		j := -1
		for k, p := range configParams {
			if eqFold(name, p.name) {
				j = k
			}
		}
		if j < 0 {
			return lim, ev, "ERR Unknown option or number of arguments for CONFIG SET - '" + string(name) + "'"
		}
		v, ok := parseInt(args[i+1])
		if !ok {
			return lim, ev, "ERR CONFIG SET failed (possibly related to argument '" + configParams[j].name +
				"') - argument couldn't be parsed into an integer"
		}
		if v < 0 {
			return lim, ev, "ERR CONFIG SET failed (possibly related to argument '" + configParams[j].name +
				"') - argument must be between 0 and 9223372036854775807 inclusive"
		}
		configParams[j].set(&lim, int(v))
	}
	return lim, ev, ""
}

func prepareConfig(args [][]byte, _ int64) ([][]byte, string) {
	if _, _, msg := parseConfigSet(args, setenc.DefaultLimits(), DefaultEvictConfig()); msg != "" {
		return nil, msg
	}
	out := append([][]byte{[]byte("config"), []byte("set")}, args[2:]...)
	return out, ""
}

// cmdConfig applies "config set": every replica changes its limits at the
// same log index. Existing sets keep their encoding until their next change,
// as in Redis.
func cmdConfig(c *execCtx, args [][]byte) {
	lim, ev, msg := parseConfigSet(args, c.ks.lim, c.ks.evict)
	if msg != "" {
		c.err(msg)
		return
	}
	c.ks.lim = lim
	c.ks.evict = ev
	c.ok()
}

var debugHelp = []string{
	"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DIGEST",
	"    Output a hex signature representing the current DB content.",
	"DIGEST-VALUE <key> [<key> ...]",
	"    Output a hex signature of the values of all the specified keys.",
}

func cmdDebug(c *execCtx, args [][]byte) {
	switch {
	case eqFold(args[1], "digest") && len(args) == 2:
		d := c.ks.digest()
		c.simple(hex.EncodeToString(d[:]))
	case eqFold(args[1], "digest-value"):
		c.array(len(args) - 2)
		for _, k := range args[2:] {
			// Like Redis, logically expired keys are digested too.
			var d [20]byte
			if pos := c.ks.find(k); pos >= 0 {
				d = c.ks.valueDigest(pos)
			}
			c.simple(hex.EncodeToString(d[:]))
		}
	case eqFold(args[1], "help") && len(args) == 2:
		c.array(len(debugHelp))
		for _, line := range debugHelp {
			c.simple(line)
		}
	default:
		c.err("ERR unknown subcommand or wrong number of arguments for '" + string(args[1]) + "'. Try DEBUG HELP.")
	}
}

func cmdPing(c *execCtx, args [][]byte) {
	switch len(args) {
	case 1:
		c.raw(command.Pong)
	case 2:
		c.bulk(args[1])
	default:
		c.err(command.ErrArity("ping"))
	}
}

func cmdEcho(c *execCtx, args [][]byte) { c.bulk(args[1]) }
