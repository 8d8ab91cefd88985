package resp

import (
	"bytes"
	"slices"
	"strings"

	"raftset/internal/command"
)

// commandDocs holds the COMMAND replies, built once from the table (Redis
// 7 shapes, RESP2: maps are flat arrays, sets are arrays).
type commandDocs struct {
	names []string // top-level names, sorted
	all   []string // names and subcommand full names ("object|encoding")
	specs map[string]*command.Spec
	info  map[string][]byte // COMMAND INFO entry by full name
	docs  map[string][]byte // COMMAND DOCS value (without the name) by full name
}

func newCommandDocs(t command.Table) *commandDocs {
	d := &commandDocs{specs: make(map[string]*command.Spec), info: make(map[string][]byte), docs: make(map[string][]byte)}
	for name, spec := range t {
		if spec.Has(command.Internal) {
			continue // between nodes only: not listed
		}
		d.names = append(d.names, name)
	}
	slices.Sort(d.names)
	for _, name := range d.names {
		spec := t[name]
		d.add(spec)
		d.all = append(d.all, name)
		for _, sub := range spec.Subs {
			d.add(sub)
			d.all = append(d.all, sub.Name)
		}
	}
	return d
}

func (d *commandDocs) add(spec *command.Spec) {
	d.specs[spec.Name] = spec
	d.info[spec.Name] = appendCommandInfo(nil, spec)
	d.docs[spec.Name] = appendCommandDocs(nil, spec)
}

// lookup finds a command by (case-insensitive) name or full name.
func (d *commandDocs) lookup(name []byte) string {
	n := strings.ToLower(string(name))
	if _, ok := d.specs[n]; ok {
		return n
	}
	return ""
}

// appendAll answers COMMAND.
func (d *commandDocs) appendAll(dst []byte) []byte {
	dst = command.AppendArray(dst, len(d.names))
	for _, n := range d.names {
		dst = append(dst, d.info[n]...)
	}
	return dst
}

// appendInfo answers COMMAND INFO [name ...]: unknown names are nil.
func (d *commandDocs) appendInfo(dst []byte, names [][]byte) []byte {
	if len(names) == 0 {
		return d.appendAll(dst)
	}
	dst = command.AppendArray(dst, len(names))
	for _, n := range names {
		if full := d.lookup(n); full != "" {
			dst = append(dst, d.info[full]...)
		} else {
			dst = append(dst, command.NullArray...)
		}
	}
	return dst
}

// appendDocs answers COMMAND DOCS [name ...]: a map; unknown names are left
// out.
func (d *commandDocs) appendDocs(dst []byte, names [][]byte) []byte {
	var list []string
	if len(names) == 0 {
		list = d.names
	} else {
		for _, n := range names {
			if full := d.lookup(n); full != "" {
				list = append(list, full)
			}
		}
	}
	dst = command.AppendArray(dst, 2*len(list))
	for _, n := range list {
		dst = command.AppendBulkString(dst, n)
		dst = append(dst, d.docs[n]...)
	}
	return dst
}

// appendList answers COMMAND LIST [FILTERBY MODULE m|ACLCAT c|PATTERN p].
func (d *commandDocs) appendList(dst []byte, args [][]byte) []byte {
	keep := func(string) bool { return true }
	switch {
	case len(args) == 0:
	case len(args) == 3 && bytes.EqualFold(args[0], []byte("filterby")):
		val := args[2]
		switch strings.ToLower(string(args[1])) {
		case "module":
			keep = func(string) bool { return false }
		case "aclcat":
			cat := "@" + strings.ToLower(string(val))
			keep = func(n string) bool { return slices.Contains(aclCategories(d.specs[n]), cat) }
		case "pattern":
			keep = func(n string) bool { return globMatch(val, []byte(n), true) }
		default:
			return command.AppendError(dst, command.ErrSyntax)
		}
	default:
		return command.AppendError(dst, command.ErrSyntax)
	}
	var out []string
	for _, n := range d.all {
		if keep(n) {
			out = append(out, n)
		}
	}
	dst = command.AppendArray(dst, len(out))
	for _, n := range out {
		dst = command.AppendBulkString(dst, n)
	}
	return dst
}

// appendCommandInfo appends one COMMAND INFO entry: name, arity, flags,
// first key, last key, step, ACL categories, tips, key specs, subcommands.
func appendCommandInfo(dst []byte, spec *command.Spec) []byte {
	dst = command.AppendArray(dst, 10)
	dst = command.AppendBulkString(dst, spec.Name)
	dst = command.AppendInt(dst, int64(spec.Arity))
	flags := commandFlags(spec)
	dst = command.AppendArray(dst, len(flags))
	for _, f := range flags {
		dst = command.AppendSimple(dst, f)
	}
	dst = command.AppendInt(dst, int64(spec.FirstKey))
	dst = command.AppendInt(dst, int64(spec.LastKey))
	dst = command.AppendInt(dst, int64(spec.Step))
	cats := aclCategories(spec)
	dst = command.AppendArray(dst, len(cats))
	for _, c := range cats {
		dst = command.AppendSimple(dst, c)
	}
	if spec.Has(command.Random) {
		dst = command.AppendArray(dst, 1)
		dst = command.AppendBulkString(dst, "nondeterministic_output")
	} else {
		dst = append(dst, command.EmptyArr...)
	}
	dst = appendKeySpecs(dst, spec)
	dst = command.AppendArray(dst, len(spec.Subs))
	for _, sub := range spec.Subs {
		dst = appendCommandInfo(dst, sub)
	}
	return dst
}

// commandFlags lists the flags COMMAND INFO reports, in Redis's order.
func commandFlags(spec *command.Spec) []string {
	var out []string
	for _, f := range []struct {
		flag command.Flags
		name string
	}{
		{command.Write, "write"}, {command.ReadOnly, "readonly"}, {command.DenyOOM, "denyoom"},
		{command.Admin, "admin"}, {command.Fast, "fast"}, {command.NoAuth, "no_auth"},
		{command.NoMulti, "no_multi"}, {command.MovableKeys, "movablekeys"},
	} {
		if spec.Has(f.flag) {
			out = append(out, f.name)
		}
	}
	return out
}

// aclCategories derives Redis's ACL categories, in Redis's order.
func aclCategories(spec *command.Spec) []string {
	has := func(f command.Flags) bool { return spec.Has(f) }
	group := spec.Group
	var out []string
	add := func(ok bool, cat string) {
		if ok {
			out = append(out, cat)
		}
	}
	add(group == "generic", "@keyspace")
	add(has(command.ReadOnly), "@read")
	add(has(command.Write), "@write")
	add(group == "set", "@set")
	add(group == "string", "@string")
	add(has(command.Admin), "@admin")
	add(has(command.Fast), "@fast")
	add(!has(command.Fast), "@slow")
	add(has(command.Admin), "@dangerous")
	add(group == "connection", "@connection")
	add(group == "transactions", "@transaction")
	return out
}

// appendKeySpecs appends the key specifications: one range spec from the
// table's first/last/step, or a keynum spec for movable-key commands whose
// key count comes first (SINTERCARD).
func appendKeySpecs(dst []byte, spec *command.Spec) []byte {
	flags := []string{"RO", "access"}
	if spec.Has(command.Write) {
		flags = []string{"RW", "update"}
	}
	var find func([]byte) []byte
	begin := spec.FirstKey
	switch {
	case spec.FirstKey > 0:
		last := spec.LastKey
		if last >= 0 {
			last -= spec.FirstKey
		}
		find = func(dst []byte) []byte {
			dst = command.AppendArray(dst, 4)
			dst = command.AppendBulkString(dst, "type")
			dst = command.AppendBulkString(dst, "range")
			dst = command.AppendBulkString(dst, "spec")
			dst = command.AppendArray(dst, 6)
			dst = command.AppendBulkString(dst, "lastkey")
			dst = command.AppendInt(dst, int64(last))
			dst = command.AppendBulkString(dst, "keystep")
			dst = command.AppendInt(dst, int64(spec.Step))
			dst = command.AppendBulkString(dst, "limit")
			return command.AppendInt(dst, 0)
		}
	case spec.Has(command.MovableKeys):
		begin = 1
		find = func(dst []byte) []byte {
			dst = command.AppendArray(dst, 4)
			dst = command.AppendBulkString(dst, "type")
			dst = command.AppendBulkString(dst, "keynum")
			dst = command.AppendBulkString(dst, "spec")
			dst = command.AppendArray(dst, 6)
			dst = command.AppendBulkString(dst, "keynumidx")
			dst = command.AppendInt(dst, 0)
			dst = command.AppendBulkString(dst, "firstkey")
			dst = command.AppendInt(dst, 1)
			dst = command.AppendBulkString(dst, "keystep")
			return command.AppendInt(dst, 1)
		}
	default:
		return append(dst, command.EmptyArr...)
	}
	dst = command.AppendArray(dst, 1)
	dst = command.AppendArray(dst, 6)
	dst = command.AppendBulkString(dst, "flags")
	dst = command.AppendArray(dst, len(flags))
	for _, f := range flags {
		dst = command.AppendSimple(dst, f)
	}
	dst = command.AppendBulkString(dst, "begin_search")
	dst = command.AppendArray(dst, 4)
	dst = command.AppendBulkString(dst, "type")
	dst = command.AppendBulkString(dst, "index")
	dst = command.AppendBulkString(dst, "spec")
	dst = command.AppendArray(dst, 2)
	dst = command.AppendBulkString(dst, "index")
	dst = command.AppendInt(dst, int64(begin))
	dst = command.AppendBulkString(dst, "find_keys")
	return find(dst)
}

// appendCommandDocs appends one COMMAND DOCS value: summary, since, group
// and, for containers, the subcommands' docs.
func appendCommandDocs(dst []byte, spec *command.Spec) []byte {
	n := 6
	if len(spec.Subs) > 0 {
		n += 2
	}
	dst = command.AppendArray(dst, n)
	dst = command.AppendBulkString(dst, "summary")
	dst = command.AppendBulkString(dst, spec.Summary)
	dst = command.AppendBulkString(dst, "since")
	dst = command.AppendBulkString(dst, spec.Since)
	dst = command.AppendBulkString(dst, "group")
	dst = command.AppendBulkString(dst, spec.Group)
	if len(spec.Subs) > 0 {
		dst = command.AppendBulkString(dst, "subcommands")
		dst = command.AppendArray(dst, 2*len(spec.Subs))
		for _, sub := range spec.Subs {
			dst = command.AppendBulkString(dst, sub.Name)
			dst = appendCommandDocs(dst, sub)
		}
	}
	return dst
}
