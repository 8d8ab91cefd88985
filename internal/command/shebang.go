package command

import "bytes"

// ScriptFlags are the flags a script's shebang line declares
// ("#!lua flags=no-writes,allow-stale").
type ScriptFlags uint8

const (
	// ScriptShebang: the script has a shebang line. Without one, a script
	// keeps Redis 6's behaviour (EVAL may write, EVAL_RO may not).
	ScriptShebang ScriptFlags = 1 << iota
	// ScriptNoWrites: the script never writes; EVAL runs it as a read.
	ScriptNoWrites
	ScriptAllowOOM
	ScriptAllowStale
	ScriptNoCluster
	ScriptAllowCrossSlot
)

var scriptFlagNames = []struct {
	name string
	flag ScriptFlags
}{
	{"no-writes", ScriptNoWrites}, {"allow-oom", ScriptAllowOOM}, {"allow-stale", ScriptAllowStale},
	{"no-cluster", ScriptNoCluster}, {"allow-cross-slot-keys", ScriptAllowCrossSlot},
}

// ParseShebang reads a script's shebang line as Redis 7 does. It returns
// the flags and the code to compile (the shebang line blanked, so that line
// numbers stay those of the body), or the error reply for a bad shebang.
// It lives here, not with the interpreter, because the front end routes
// EVAL of a no-writes script as a read.
func ParseShebang(body []byte) (ScriptFlags, []byte, string) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return 0, body, ""
	}
	nl := bytes.IndexByte(body, '\n')
	if nl < 0 {
		return 0, nil, "ERR Invalid script shebang"
	}
	flags, msg := shebangFlags(body[:nl])
	if msg != "" {
		return 0, nil, msg
	}
	code := make([]byte, len(body))
	copy(code, body)
	for i := range nl {
		code[i] = ' '
	}
	return flags, code, ""
}

// NoWritesScript reports whether body declares no-writes in a valid
// shebang: the front end runs EVAL of such a script as a read.
func NoWritesScript(body []byte) bool {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return false
	}
	nl := bytes.IndexByte(body, '\n')
	if nl < 0 {
		return false
	}
	flags, msg := shebangFlags(body[:nl])
	return msg == "" && flags&ScriptNoWrites != 0
}

func shebangFlags(line []byte) (ScriptFlags, string) {
	parts := bytes.Fields(line)
	if len(parts) == 0 || string(parts[0]) != "#!lua" {
		engine := line
		if len(parts) > 0 {
			engine = parts[0]
		}
		return 0, "ERR Unexpected engine in script shebang: " + string(engine)
	}
	flags := ScriptShebang
	for _, p := range parts[1:] {
		list, ok := bytes.CutPrefix(p, []byte("flags="))
		if !ok {
			return 0, "ERR Unknown lua shebang option: " + string(p)
		}
		for _, f := range bytes.Split(list, []byte(",")) {
			if len(f) == 0 {
				continue
			}
			known := false
			for _, n := range scriptFlagNames {
				if string(f) == n.name {
					flags |= n.flag
					known = true
				}
			}
			if !known {
				return 0, "ERR Unexpected flag in script shebang: " + string(f)
			}
		}
	}
	return flags, ""
}
