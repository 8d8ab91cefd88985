package command

import (
	"fmt"
	"strconv"
	"strings"

	"raftset/internal/strictint"
)

// Arg is one argument of a command as Redis 7's COMMAND DOCS describes it;
// clients (redis-cli's hints among them) read these to know a command's
// syntax.
type Arg struct {
	Name  string
	Type  string // key, string, integer, double, pattern, unix-time, pure-token, oneof, block
	Token string // the literal word before the value ("EX"), if any
	Since string // the version that added the argument, if later than the command
	// DeprecatedSince is the version that deprecated the argument (CLIENT
	// KILL's old ip:port form).
	DeprecatedSince string
	// KeySpec is the index of this key argument's key specification in
	// COMMAND INFO; -1 for arguments that are not keys.
	KeySpec       int
	Optional      bool
	Multiple      bool
	MultipleToken bool   // the token repeats with each value
	Args          []*Arg // the alternatives of a oneof, the parts of a block
}

// KeySpec is one of Redis 7's key specifications (COMMAND INFO), derived from
// the key arguments: where the search begins (an argument index) and how keys
// follow from there (a range, or a count given by a numkeys argument).
type KeySpec struct {
	Flags []string // RO/RW/OW/RM, access/update/insert/delete, variable_flags
	Begin int      // begin_search index
	// KeyNum is true for a keynum spec: argv[Begin] holds the number of keys,
	// which follow it. Otherwise the spec is a range: LastKey is relative to
	// Begin (-1: up to the last argument) and KeyStep the distance between keys.
	KeyNum  bool
	LastKey int
	KeyStep int
	// Unknown is a spec whose keys no position rule finds (SORT's BY, GET
	// and STORE): begin_search and find_keys are "unknown", and FindKeys
	// skips it.
	Unknown bool
}

// syntax sets the spec's arguments (COMMAND DOCS) and the key
// specifications derived from them (COMMAND INFO) from one line in a
// notation close to the one Redis's documentation uses:
//
//	name:type          an argument (types: key string integer double pattern unix-time)
//	key:key{RW,insert} a key with the flags of its key specification
//	TOKEN              a pure token, named after it in lower case
//	TOKEN:name         a pure token with another name
//	TOKEN name:type    an argument introduced by a token
//	[ ... ]            optional; ( ... ) required
//	[label: a | b]     a oneof named label; [label: a b] a block; either may
//	                   start with a token: [TOKEN label: ...]
//	x...  x...+        multiple; multiple with the token repeated each time
//	x@7.0.0            the argument is newer than its command
//	x~2.8.12           the argument is deprecated since that version
//	ip:port:string     a name may hold colons: the type follows the last one
//	k:key{=0}          a key sharing key specification 0 (LCS's two keys)
//	p:pattern{?RO,access} a pattern or key whose spec is "unknown": its keys
//	                   have no position (SORT's BY, GET and STORE)
//
// Suffixes also follow a closing bracket: [ ... ]@6.2.0. Key specification
// indexes are given in the order the keys appear. A spec without a syntax
// line takes no arguments. A line that does not parse is a programming
// error in the table: it panics, and the package's tests catch it.
func (s *Spec) syntax(line string) *Spec {
	args, keys, err := parseArgs(line)
	if err != nil {
		panic(fmt.Sprintf("command: arguments of %s: %v", s.Name, err))
	}
	s.Args = args
	first := 1 // argv index of the first argument
	if strings.Contains(s.Name, "|") {
		first = 2
	}
	s.KeySpecs, err = keySpecs(args, keys, first, s.Has(MovableKeys))
	if err != nil {
		panic(fmt.Sprintf("command: key specs of %s: %v", s.Name, err))
	}
	return s
}

// keySpecs derives the key specifications from the top-level arguments: a
// key (or a block starting with a key) at a fixed position is a range spec,
// a multiple key right after a numkeys argument of a movable-keys command is
// a keynum spec. A key after an optional or repeated argument has no fixed
// position: Redis describes none of those among the commands here.
func keySpecs(args []*Arg, keyFlags [][]string, pos int, movable bool) ([]KeySpec, error) {
	var out []KeySpec
	fixed := true
	for i, a := range args {
		key, step := a, 1
		if a.Type == "block" && len(a.Args) > 0 && a.Args[0].Type == "key" {
			key, step = a.Args[0], len(a.Args)
		}
		switch {
		case key.KeySpec >= 0 && key.KeySpec < len(keyFlags) && len(keyFlags[key.KeySpec]) > 0 && keyFlags[key.KeySpec][0] == "?":
			if key.KeySpec == len(out) {
				out = append(out, KeySpec{Flags: keyFlags[key.KeySpec][1:], Unknown: true})
			}
		case key.Type == "key" && key.KeySpec < len(out):
			// A key sharing an earlier range spec extends it.
			ks := &out[key.KeySpec]
			if !fixed || ks.Unknown || ks.KeyNum || ks.LastKey < 0 {
				return nil, fmt.Errorf("key %s cannot share spec %d", key.Name, key.KeySpec)
			}
			ks.LastKey = pos - ks.Begin
		case key.Type == "key":
			if !fixed {
				return nil, fmt.Errorf("key %s has no fixed position", key.Name)
			}
			ks := KeySpec{Flags: keyFlags[key.KeySpec], Begin: pos, KeyStep: step}
			if a.Multiple {
				ks.LastKey = -1
			}
			if movable && a.Multiple && i > 0 && args[i-1].Name == "numkeys" {
				ks = KeySpec{Flags: ks.Flags, Begin: pos - 1, KeyNum: true}
			}
			out = append(out, ks)
		}
		if a.Optional || a.Multiple {
			fixed = false
		}
		pos++
	}
	return out, nil
}

// argParser reads one syntax line.
type argParser struct {
	s        string
	pos      int
	keyFlags [][]string // by key spec index
}

func parseArgs(s string) ([]*Arg, [][]string, error) {
	p := &argParser{s: s}
	args, err := p.seq()
	if err == nil && p.pos < len(p.s) {
		err = fmt.Errorf("unexpected %q at %d", p.s[p.pos:], p.pos)
	}
	return args, p.keyFlags, err
}

// peek returns the next word (a bracket, a bar, or a run of other non-space
// characters) without consuming it.
func (p *argParser) peek() (string, int) {
	i := p.pos
	for i < len(p.s) && p.s[i] == ' ' {
		i++
	}
	if i == len(p.s) {
		return "", i
	}
	if strings.IndexByte("[]()|", p.s[i]) >= 0 {
		return p.s[i : i+1], i + 1
	}
	j := i
	for j < len(p.s) && strings.IndexByte(" []()|", p.s[j]) < 0 {
		j++
	}
	return p.s[i:j], j
}

func (p *argParser) next() string {
	w, end := p.peek()
	p.pos = end
	return w
}

// seq reads arguments up to a closing bracket, a bar or the end.
func (p *argParser) seq() ([]*Arg, error) {
	var out []*Arg
	for {
		w, _ := p.peek()
		switch w {
		case "", "]", ")", "|":
			return out, nil
		}
		a, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
}

// item reads one argument or bracketed group, with its suffixes.
func (p *argParser) item() (*Arg, error) {
	var a *Arg
	var err error
	switch w := p.next(); {
	case w == "[" || w == "(":
		if a, err = p.group(w == "["); err != nil {
			return nil, err
		}
	case isToken(w):
		// TOKEN alone is a pure token; TOKEN name:type introduces a value.
		if nw, _ := p.peek(); nw != "" && !isToken(nw) && strings.IndexByte("[]()|", nw[0]) < 0 {
			if a, err = p.item(); err != nil {
				return nil, err
			}
			a.Token = w
			return a, nil
		}
		base, suffix := splitSuffix(w)
		a = &Arg{Name: strings.ToLower(base), Type: "pure-token", Token: base, KeySpec: -1}
		return a, p.suffixes(a, suffix)
	default:
		base, suffix := splitSuffix(w)
		i := strings.LastIndexByte(base, ':')
		ok := i >= 0
		name, typ := base, ""
		if ok {
			name, typ = base[:i], base[i+1:]
		}
		if !ok || name == "" {
			return nil, fmt.Errorf("argument %q has no type", w)
		}
		if isToken(name) && typ != "" && strings.ToLower(typ) == typ && !strings.Contains(typ, ":") {
			// TOKEN:name is a pure token with a name of its own (SORT's
			// ALPHA is "sorting").
			switch typ {
			case "key", "string", "integer", "double", "pattern", "unix-time":
			default:
				a = &Arg{Name: typ, Type: "pure-token", Token: name, KeySpec: -1}
				return a, p.suffixes(a, suffix)
			}
		}
		a = &Arg{Name: name, Type: typ, KeySpec: -1}
		if typ == "key" {
			a.KeySpec = len(p.keyFlags)
			p.keyFlags = append(p.keyFlags, nil)
		}
		switch typ {
		case "key", "string", "integer", "double", "pattern", "unix-time":
		default:
			return nil, fmt.Errorf("argument %q: unknown type", w)
		}
		return a, p.suffixes(a, suffix)
	}
	// Suffixes of a group follow its closing bracket.
	if w, end := p.peek(); w != "" && (w[0] == '.' || w[0] == '@') {
		p.pos = end
		return a, p.suffixes(a, w)
	}
	return a, nil
}

// group reads a bracketed group after its opening bracket.
func (p *argParser) group(optional bool) (*Arg, error) {
	var token, label string
	if w, end := p.peek(); isToken(w) {
		save := p.pos
		p.pos = end
		if l, _ := p.peek(); strings.HasSuffix(l, ":") {
			token = w
		} else {
			p.pos = save
		}
	}
	if w, end := p.peek(); strings.HasSuffix(w, ":") {
		label = strings.TrimSuffix(w, ":")
		p.pos = end
	}
	var alts [][]*Arg
	for {
		seq, err := p.seq()
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		w := p.next()
		if w == "|" {
			continue
		}
		if (optional && w != "]") || (!optional && w != ")") {
			return nil, fmt.Errorf("unclosed group at %d", p.pos)
		}
		break
	}
	var a *Arg
	switch {
	case label == "":
		if len(alts) != 1 || len(alts[0]) != 1 {
			return nil, fmt.Errorf("group without a label at %d holds more than one argument", p.pos)
		}
		a = alts[0][0]
	case len(alts) > 1:
		a = &Arg{Name: label, Type: "oneof", Token: token, KeySpec: -1}
		for _, alt := range alts {
			if len(alt) != 1 {
				return nil, fmt.Errorf("alternative of %s holds %d arguments", label, len(alt))
			}
			a.Args = append(a.Args, alt[0])
		}
	default:
		a = &Arg{Name: label, Type: "block", Token: token, KeySpec: -1, Args: alts[0]}
	}
	a.Optional = a.Optional || optional
	return a, nil
}

// suffixes applies "...", "...+", "@version" and "{flags}" in any order.
func (p *argParser) suffixes(a *Arg, s string) error {
	for s != "" {
		switch {
		case strings.HasPrefix(s, "...+"):
			a.Multiple, a.MultipleToken, s = true, true, s[4:]
		case strings.HasPrefix(s, "..."):
			a.Multiple, s = true, s[3:]
		case s[0] == '@' || s[0] == '~':
			// A version runs to the next suffix: digits and dots.
			end := 1
			for end < len(s) && (s[end] == '.' && !strings.HasPrefix(s[end:], "...") || '0' <= s[end] && s[end] <= '9') {
				end++
			}
			if end == 1 {
				return fmt.Errorf("argument %s: empty version", a.Name)
			}
			if s[0] == '~' {
				a.DeprecatedSince, s = s[1:end], s[end:]
				continue
			}
			a.Since, s = s[1:end], s[end:]
		case s[0] == '{':
			end := strings.IndexByte(s, '}')
			if end < 0 || (a.Type != "key" && a.Type != "pattern") {
				return fmt.Errorf("argument %s: bad key flags %q", a.Name, s)
			}
			body := s[1:end]
			s = s[end+1:]
			if n, ok := strings.CutPrefix(body, "="); ok {
				idx, err := strconv.Atoi(n)
				if err != nil || idx < 0 || idx >= len(p.keyFlags)-btoi(a.Type == "key") {
					return fmt.Errorf("argument %s: no key spec %q to share", a.Name, n)
				}
				if a.Type == "key" {
					p.keyFlags = p.keyFlags[:len(p.keyFlags)-1]
				}
				a.KeySpec = idx
				continue
			}
			if a.Type == "pattern" {
				if !strings.HasPrefix(body, "?") {
					return fmt.Errorf("argument %s: a pattern's key spec must be unknown (?)", a.Name)
				}
				a.KeySpec = len(p.keyFlags)
				p.keyFlags = append(p.keyFlags, nil)
			}
			flags := strings.Split(body, ",")
			if f, ok := strings.CutPrefix(flags[0], "?"); ok {
				flags = append([]string{"?", f}, flags[1:]...)
			}
			p.keyFlags[a.KeySpec] = flags
		default:
			return fmt.Errorf("argument %s: unknown suffix %q", a.Name, s)
		}
	}
	if a.Type == "key" && p.keyFlags[a.KeySpec] == nil {
		return fmt.Errorf("key %s: no key flags", a.Name)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// splitSuffix cuts a word at its first suffix.
func splitSuffix(w string) (base, suffix string) {
	if i := strings.IndexAny(w, ".@{~"); i >= 0 {
		return w[:i], w[i:]
	}
	return w, ""
}

// isToken reports whether w is an upper-case literal such as NX or LIB-NAME
// (optionally with suffixes).
func isToken(w string) bool {
	base, _ := splitSuffix(w)
	if base == "" || base[0] < 'A' || base[0] > 'Z' {
		return false
	}
	for _, c := range base {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// FindKeys returns the argv positions of a command's keys and, for each, the
// flags of its key specification, following the key specs as Redis's
// getKeysUsingKeySpecs does: a spec whose keys would run past the arguments
// contributes none, and a bad key count fails the whole search (ok false).
func (s *Spec) FindKeys(argv [][]byte) (pos []int, flags [][]string, ok bool) {
	for _, ks := range s.KeySpecs {
		first := ks.Begin
		if ks.Unknown || first >= len(argv) {
			continue
		}
		var last, step int
		if ks.KeyNum {
			n, valid := strictint.Parse(argv[first])
			if !valid || n < 0 {
				return nil, nil, false
			}
			first, step = first+1, 1
			last = first + int(min(n, int64(len(argv))))*step - step
		} else {
			step = ks.KeyStep
			last = first + ks.LastKey
			if ks.LastKey < 0 {
				last = len(argv) + ks.LastKey
			}
		}
		if last >= len(argv) || last < first {
			continue
		}
		for i := first; i <= last; i += step {
			pos = append(pos, i)
			flags = append(flags, ks.Flags)
		}
	}
	return pos, flags, true
}
