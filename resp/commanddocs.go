package resp

import (
	"bytes"
	"slices"
	"strings"

	"raftset/internal/command"
	"raftset/internal/glob"
)

// commandDocs holds the COMMAND replies, built once from the table (Redis
// 7 shapes, RESP2: maps are flat arrays, sets are arrays).
type commandDocs struct {
	table command.Table
	names []string // top-level names, sorted
	all   []string // names and subcommand full names ("object|encoding")
	specs map[string]*command.Spec
	info  map[string][]byte // COMMAND INFO entry by full name
	docs  map[string][]byte // COMMAND DOCS value (without the name) by full name
}

func newCommandDocs(t command.Table) *commandDocs {
	d := &commandDocs{table: t, specs: make(map[string]*command.Spec), info: make(map[string][]byte), docs: make(map[string][]byte)}
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
			keep = func(n string) bool { return glob.Match(val, []byte(n), true) }
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

// aclCategories gives Redis's ACL categories of a command, in Redis's order.
func aclCategories(spec *command.Spec) []string { return command.ACLCategories(spec) }

// appendKeySpecs appends the key specifications derived from the command's
// key arguments (args.go): a range from a fixed position, or a keynum spec
// whose count comes first (SINTERCARD).
func appendKeySpecs(dst []byte, spec *command.Spec) []byte {
	dst = command.AppendArray(dst, len(spec.KeySpecs))
	for _, ks := range spec.KeySpecs {
		dst = command.AppendArray(dst, 6)
		dst = command.AppendBulkString(dst, "flags")
		dst = command.AppendArray(dst, len(ks.Flags))
		for _, f := range ks.Flags {
			dst = command.AppendSimple(dst, f)
		}
		dst = command.AppendBulkString(dst, "begin_search")
		if ks.Unknown {
			dst = appendTypeSpec(dst, "unknown")
			dst = command.AppendBulkString(dst, "find_keys")
			dst = appendTypeSpec(dst, "unknown")
			continue
		}
		dst = appendTypeSpec(dst, "index", "index", ks.Begin)
		dst = command.AppendBulkString(dst, "find_keys")
		if ks.KeyNum {
			dst = appendTypeSpec(dst, "keynum", "keynumidx", 0, "firstkey", 1, "keystep", 1)
		} else {
			dst = appendTypeSpec(dst, "range", "lastkey", ks.LastKey, "keystep", ks.KeyStep, "limit", 0)
		}
	}
	return dst
}

// appendTypeSpec appends {type: typ, spec: {name: value, ...}}; fields
// alternate names (string) and values (int).
func appendTypeSpec(dst []byte, typ string, fields ...any) []byte {
	dst = command.AppendArray(dst, 4)
	dst = command.AppendBulkString(dst, "type")
	dst = command.AppendBulkString(dst, typ)
	dst = command.AppendBulkString(dst, "spec")
	dst = command.AppendArray(dst, len(fields))
	for i := 0; i < len(fields); i += 2 {
		dst = command.AppendBulkString(dst, fields[i].(string))
		dst = command.AppendInt(dst, int64(fields[i+1].(int)))
	}
	return dst
}

// appendCommandDocs appends one COMMAND DOCS value: summary, since, group,
// the arguments and, for containers, the subcommands' docs (Redis 7.0's
// fields and order; complexity, history and doc_flags are left out).
func appendCommandDocs(dst []byte, spec *command.Spec) []byte {
	n := 6
	if len(spec.Args) > 0 {
		n += 2
	}
	if spec.DeprecatedSince != "" {
		n += 4
	}
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
	if spec.DeprecatedSince != "" {
		dst = command.AppendBulkString(dst, "deprecated_since")
		dst = command.AppendBulkString(dst, spec.DeprecatedSince)
		dst = command.AppendBulkString(dst, "replaced_by")
		dst = command.AppendBulkString(dst, spec.ReplacedBy)
	}
	if len(spec.Args) > 0 {
		dst = command.AppendBulkString(dst, "arguments")
		dst = appendArgs(dst, spec.Args)
	}
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

// appendArgs appends an arguments array as Redis 7.0's
// addReplyCommandArgList does: name, type, key_spec_index, token, since,
// flags, arguments, each only when it applies.
func appendArgs(dst []byte, args []*command.Arg) []byte {
	dst = command.AppendArray(dst, len(args))
	for _, a := range args {
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{a.Optional, "optional"}, {a.Multiple, "multiple"}, {a.MultipleToken, "multiple_token"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		n := 4
		for _, present := range []bool{a.KeySpec >= 0, a.Token != "", a.Since != "", a.DeprecatedSince != "", len(flags) > 0, len(a.Args) > 0} {
			if present {
				n += 2
			}
		}
		dst = command.AppendArray(dst, n)
		dst = command.AppendBulkString(dst, "name")
		dst = command.AppendBulkString(dst, a.Name)
		dst = command.AppendBulkString(dst, "type")
		dst = command.AppendBulkString(dst, a.Type)
		if a.KeySpec >= 0 {
			dst = command.AppendBulkString(dst, "key_spec_index")
			dst = command.AppendInt(dst, int64(a.KeySpec))
		}
		if a.Token != "" {
			dst = command.AppendBulkString(dst, "token")
			dst = command.AppendBulkString(dst, a.Token)
		}
		if a.Since != "" {
			dst = command.AppendBulkString(dst, "since")
			dst = command.AppendBulkString(dst, a.Since)
		}
		if a.DeprecatedSince != "" {
			dst = command.AppendBulkString(dst, "deprecated_since")
			dst = command.AppendBulkString(dst, a.DeprecatedSince)
		}
		if len(flags) > 0 {
			dst = command.AppendBulkString(dst, "flags")
			dst = command.AppendArray(dst, len(flags))
			for _, f := range flags {
				dst = command.AppendSimple(dst, f)
			}
		}
		if len(a.Args) > 0 {
			dst = command.AppendBulkString(dst, "arguments")
			dst = appendArgs(dst, a.Args)
		}
	}
	return dst
}

// appendGetKeys answers COMMAND GETKEYS and GETKEYSANDFLAGS with Redis's
// checks in its order: the command exists, has keys, suits its arity, and
// its key count (SINTERCARD's numkeys) finds at least one key.
func (d *commandDocs) appendGetKeys(dst []byte, argv [][]byte, withFlags bool) []byte {
	spec := d.table.Lookup(argv[0])
	if spec != nil && len(spec.Subs) > 0 && len(argv) > 1 {
		spec = spec.Sub(string(argv[1]))
	}
	switch {
	case spec == nil || spec.Has(command.Internal):
		return command.AppendError(dst, "ERR Invalid command specified")
	case len(spec.KeySpecs) == 0:
		return command.AppendError(dst, "ERR The command has no key arguments")
	case !spec.CheckArity(len(argv)):
		return command.AppendError(dst, "ERR Invalid number of arguments specified for command")
	}
	pos, flags, ok := spec.FindKeys(argv)
	if !ok || len(pos) == 0 {
		return command.AppendError(dst, "ERR Invalid arguments specified for command")
	}
	dst = command.AppendArray(dst, len(pos))
	for i, p := range pos {
		if !withFlags {
			dst = command.AppendBulk(dst, argv[p])
			continue
		}
		dst = command.AppendArray(dst, 2)
		dst = command.AppendBulk(dst, argv[p])
		fl := flags[i]
		if slices.Contains(fl, "variable_flags") {
			fl = setKeyFlags(argv)
		}
		dst = command.AppendArray(dst, len(fl))
		for _, f := range fl {
			dst = command.AppendSimple(dst, f)
		}
	}
	return dst
}

// setKeyFlags are the flags of SET's key for one call, as Redis's
// setGetKeys decides them: the key spec says "variable_flags" because only
// SET ... GET reads the old value.
func setKeyFlags(argv [][]byte) []string {
	for _, a := range argv[3:] {
		if bytes.EqualFold(a, []byte("get")) {
			return []string{"RW", "access", "update"}
		}
	}
	return []string{"OW", "update"}
}
