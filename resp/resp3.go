package resp

import (
	"bytes"
	"strconv"
	"strings"
	"sync/atomic"

	"raftset/internal/command"
)

// RESP3 (HELLO 3). The state machine, the cluster and most of this package
// build RESP2 replies; a RESP3 connection's replies are converted on their
// way out, by a shape chosen from the command: which arrays are maps
// (HELLO, CONFIG GET, ACL GETUSER...), sets (SMEMBERS, SINTER...) or push
// messages (pub/sub), which bulk strings are verbatim text (INFO, CLIENT
// LIST) or doubles (ACL LOG's age-seconds), and every null ($-1, *-1)
// becomes RESP3's _. RESP2 connections pay one boolean test per command
// (special, false for them) and nothing per reply.
//
// The same per-command hook mutes replies for CLIENT REPLY OFF and SKIP.

// shapeKind says how one RESP2 reply becomes RESP3.
type shapeKind uint8

const (
	shKeep     shapeKind = iota // as it is, nulls converted (at any depth)
	shArray                     // an array whose elements have shapes (elem, elems)
	shSet                       // an array that is a set: ~
	shMap                       // an array of key/value pairs: %
	shPush                      // an out-of-band message: >
	shVerbatim                  // a bulk string that is text: =txt:
	shDouble                    // a bulk string that is a double: ,
	shMute                      // no reply at all (CLIENT REPLY OFF / SKIP)
	shScript2                   // a RESP2 connection's script reply (scriptreply.go)
)

// shape describes a reply's RESP3 form. A nil *shape is shKeep.
type shape struct {
	kind   shapeKind
	elem   *shape            // elements of an array, set or push; map values not in fields
	elems  []*shape          // positional shapes of an array's first elements
	fields map[string]*shape // map values by key
	// emptySet: an array that Redis sends as an empty set when it has no
	// elements (COMMAND INFO's subcommands).
	emptySet bool
}

var (
	keepShape  = &shape{kind: shKeep}
	muteShape  = &shape{kind: shMute}
	setShape   = &shape{kind: shSet}
	mapShape   = &shape{kind: shMap}
	pushShape  = &shape{kind: shPush}
	verbShape  = &shape{kind: shVerbatim}
	nullSuffix = []byte("-1\r\n")
)

func arrayOf(elem *shape) *shape { return &shape{kind: shArray, elem: elem} }
func mapWith(fields map[string]*shape) *shape {
	return &shape{kind: shMap, fields: fields}
}

// replyShapes are the commands whose RESP3 reply is more than their RESP2
// reply with nulls converted, as Redis 7.0 answers them.
var replyShapes = buildReplyShapes()

func buildReplyShapes() map[string]*shape {
	// COMMAND INFO: [name arity flags first last step categories tips
	// key-specs subcommands], flags, categories, tips and key specs as sets.
	keySpec := mapWith(map[string]*shape{"flags": setShape,
		"begin_search": mapWith(map[string]*shape{"spec": mapShape}),
		"find_keys":    mapWith(map[string]*shape{"spec": mapShape})})
	info := &shape{kind: shArray}
	info.elems = []*shape{nil, nil, setShape, nil, nil, nil, setShape, setShape, {kind: shSet, elem: keySpec},
		{kind: shArray, elem: info, emptySet: true}}
	// COMMAND DOCS: a map of name → doc map; arguments nest.
	arg := mapWith(map[string]*shape{"flags": setShape})
	arg.fields["arguments"] = arrayOf(arg)
	doc := mapWith(map[string]*shape{"doc_flags": setShape, "history": setShape, "arguments": arrayOf(arg)})
	docs := &shape{kind: shMap, elem: doc}
	doc.fields["subcommands"] = docs

	return map[string]*shape{
		"hello":                   mapShape,
		"config|get":              mapShape,
		"smembers":                setShape,
		"sinter":                  setShape,
		"sunion":                  setShape,
		"sdiff":                   setShape,
		"spop":                    setShape,
		"info":                    verbShape,
		"client|info":             verbShape,
		"client|list":             verbShape,
		"client|trackinginfo":     mapWith(map[string]*shape{"flags": setShape}),
		"lcs":                     mapShape,
		"acl|getuser":             mapWith(map[string]*shape{"flags": setShape, "selectors": arrayOf(mapShape)}),
		"acl|log":                 arrayOf(mapWith(map[string]*shape{"age-seconds": {kind: shDouble}})),
		"command":                 arrayOf(info),
		"command|info":            arrayOf(info),
		"command|docs":            docs,
		"command|getkeysandflags": arrayOf(&shape{kind: shArray, elems: []*shape{nil, setShape}}),
		"subscribe":               pushShape,
		"psubscribe":              pushShape,
		"unsubscribe":             pushShape,
		"punsubscribe":            pushShape,
	}
}

// sentinelShapes are SENTINEL's (one spec in the table: its subcommand is
// args[1]).
var sentinelShapes = map[string]*shape{
	"master":    mapShape,
	"masters":   arrayOf(mapShape),
	"replicas":  arrayOf(mapShape),
	"slaves":    arrayOf(mapShape),
	"sentinels": arrayOf(mapShape),
}

// resp3State is a connection's protocol and reply mode. The plain fields
// belong to the connection's goroutine; proto is read by others (PUBLISH,
// CLIENT LIST, invalidations).
type resp3State struct {
	// special is set when replies may need more than a plain write: RESP3,
	// or CLIENT REPLY OFF/SKIP. handle looks at nothing else when it is not.
	special  bool
	resp3    bool
	replyOff bool // CLIENT REPLY OFF
	skipNext bool // CLIENT REPLY SKIP: the next command's reply is dropped
	skipThis bool
	cur      *shape // shape of the command being handled; nil: as is
	buf      []byte
	proto    atomic.Int32 // 2 or 3; 0 counts as 2
}

func (r *resp3State) update() {
	r.special = r.resp3 || r.replyOff || r.skipNext || r.skipThis
	if !r.special {
		r.cur = nil
	}
}

// setProto switches the connection to RESP ver (2 or 3).
func (c *client) setProto(ver int) {
	c.r3.resp3 = ver == 3
	c.r3.proto.Store(int32(ver))
	c.r3.update()
}

// isRESP3 is for goroutines other than the connection's.
func (c *client) isRESP3() bool { return c.r3.proto.Load() == 3 }

// beginCommand runs at the start of every command of a special connection:
// it moves CLIENT REPLY SKIP on and picks the shape of replies decided
// before the command is known (unknown command, arity).
func (c *client) beginCommand() {
	r := &c.r3
	r.skipThis, r.skipNext = r.skipNext, false
	r.update()
	r.cur = nil
	switch {
	case r.replyOff || r.skipThis:
		r.cur = muteShape
	case r.resp3:
		r.cur = keepShape
	}
}

// commandShape sets the shape of the command's reply once its spec is known.
func (c *client) commandShape(spec *command.Spec, args [][]byte) {
	r := &c.r3
	if r.cur == muteShape || !r.resp3 {
		return
	}
	if sh := replyShapes[spec.Name]; sh != nil {
		r.cur = sh
	} else if spec.Name == "sentinel" && len(args) > 1 {
		if sh := sentinelShapes[strings.ToLower(string(args[1]))]; sh != nil {
			r.cur = sh
		}
	}
}

// txShape is EXEC's shape: each queued command's own.
func (c *client) txShape() *shape {
	r := &c.r3
	if r.cur == muteShape || !r.resp3 {
		return r.cur
	}
	sh := &shape{kind: shArray, elems: make([]*shape, len(c.queue))}
	for i, q := range c.queue {
		sh.elems[i] = replyShapes[q.spec.Name]
		if q.spec.Name == "sentinel" && len(q.args) > 1 {
			sh.elems[i] = sentinelShapes[strings.ToLower(string(q.args[1]))]
		}
	}
	return sh
}

// writeShaped writes a reply in the form sh asks (nil: as it is).
func (c *client) writeShaped(sh *shape, b []byte) {
	switch {
	case sh == nil:
		c.write(b)
	case sh == muteShape:
	case sh == scriptShape:
		c.r3.buf = toRESP2(c.r3.buf[:0], b)
		c.write(c.r3.buf)
	default:
		c.r3.buf = toRESP3(c.r3.buf[:0], b, sh)
		c.write(c.r3.buf)
	}
}

// toRESP3 appends the RESP3 form of src — one or more complete RESP2
// replies, each shaped by sh — to dst.
func toRESP3(dst, src []byte, sh *shape) []byte {
	if sh == nil || sh.kind == shKeep {
		if !bytes.Contains(src, nullSuffix) {
			return append(dst, src...) // no null anywhere: nothing to convert
		}
	}
	for len(src) > 0 {
		var ok bool
		start := len(dst)
		dst, src, ok = convert(dst, src, sh)
		if !ok {
			// Not a reply this package built: send it as it is.
			return append(dst[:start], src...)
		}
	}
	return dst
}

// convert converts the first reply of src and returns the rest of src.
func convert(dst, src []byte, sh *shape) ([]byte, []byte, bool) {
	nl := bytes.IndexByte(src, '\n')
	if nl < 3 || src[nl-1] != '\r' {
		return dst, src, false
	}
	line, rest := src[:nl+1], src[nl+1:]
	kind := shKeep
	if sh != nil {
		kind = sh.kind
	}
	switch src[0] {
	case '$':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return dst, src, false
		}
		if n < 0 {
			return append(dst, '_', '\r', '\n'), rest, true
		}
		if len(rest) < n+2 {
			return dst, src, false
		}
		data := rest[:n]
		rest = rest[n+2:]
		switch kind {
		case shVerbatim:
			dst = append(dst, '=')
			dst = strconv.AppendInt(dst, int64(n+4), 10)
			dst = append(dst, "\r\ntxt:"...)
			dst = append(dst, data...)
			return append(dst, '\r', '\n'), rest, true
		case shDouble:
			dst = append(dst, ',')
			dst = append(dst, data...)
			return append(dst, '\r', '\n'), rest, true
		}
		dst = append(dst, line...)
		dst = append(dst, data...)
		return append(dst, '\r', '\n'), rest, true
	case '*':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return dst, src, false
		}
		if n < 0 {
			return append(dst, '_', '\r', '\n'), rest, true
		}
		hdr, count := byte('*'), n
		if n == 0 && sh != nil && sh.emptySet {
			hdr = '~'
		}
		switch kind {
		case shSet:
			hdr = '~'
		case shPush:
			hdr = '>'
		case shMap:
			if n%2 == 0 {
				hdr, count = '%', n/2
			}
		}
		dst = append(dst, hdr)
		dst = strconv.AppendInt(dst, int64(count), 10)
		dst = append(dst, '\r', '\n')
		var key []byte
		for i := 0; i < n; i++ {
			var child *shape
			if sh != nil {
				switch {
				case i < len(sh.elems):
					child = sh.elems[i]
				case hdr == '%' && i%2 == 0:
					key = bulkText(rest)
				case hdr == '%':
					child = sh.elem
					if f, ok := sh.fields[string(key)]; ok {
						child = f
					}
				default:
					child = sh.elem
				}
			}
			var ok bool
			if dst, rest, ok = convert(dst, rest, child); !ok {
				return dst, src, false
			}
		}
		return dst, rest, true
	case '=':
		// A script's verbatim string: length-prefixed like a bulk string.
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || n < 0 || len(rest) < n+2 {
			return dst, src, false
		}
		dst = append(dst, line...)
		return append(dst, rest[:n+2]...), rest[n+2:], true
	case '%', '~':
		// A script's map or set: its elements as they are, nulls converted.
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || n < 0 {
			return dst, src, false
		}
		dst = append(dst, line...)
		if src[0] == '%' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			var ok bool
			if dst, rest, ok = convert(dst, rest, nil); !ok {
				return dst, src, false
			}
		}
		return dst, rest, true
	}
	return append(dst, line...), rest, true
}

// bulkText returns the text of the bulk or simple string at the start of
// src, or nil.
func bulkText(src []byte) []byte {
	nl := bytes.IndexByte(src, '\n')
	if nl < 3 {
		return nil
	}
	switch src[0] {
	case '+':
		return src[1 : nl-1]
	case '$':
		n, err := strconv.Atoi(string(src[1 : nl-1]))
		if err != nil || n < 0 || len(src) < nl+1+n {
			return nil
		}
		return src[nl+1 : nl+1+n]
	}
	return nil
}
