package resp

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"raftset/internal/acl"
	"raftset/internal/command"
	"raftset/internal/glob"
)

// fakeStore is an in-memory Store with a handful of commands (SADD,
// SMEMBERS, SISMEMBER, SCARD, GET, SET, INCR, DEL, EXISTS), transactions with
// watch stamps, and a little CONFIG. It records how calls were batched.
type fakeStore struct {
	mu       sync.Mutex
	sets     map[string]map[string]bool
	strs     map[string]string
	stamps   map[string]uint64
	clock    uint64
	config   map[string]string
	writes   []int // ops per Write call
	kinds    [][]command.OpKind
	reads    []int    // commands per Read/ReadBatch call
	stale    []bool   // stale flag per read call
	admin    []string // Admin calls, args joined by spaces
	internal []string // Internal calls, args joined by spaces
	entered  chan struct{}
	gate     chan struct{} // when set, Write waits for it (or ctx)
	users    *acl.Registry // ACL SETUSER, DELUSER, LOAD apply here, as the state machine does
}

func newFakeStore() *fakeStore {
	return &fakeStore{
		sets:   make(map[string]map[string]bool),
		strs:   make(map[string]string),
		stamps: make(map[string]uint64),
		config: map[string]string{"set-max-intset-entries": "512", "set-max-listpack-entries": "128"},
		users:  mustUsers(),
	}
}

func mustUsers() *acl.Registry {
	r, err := acl.New(acl.TableCommands(command.Commands()), globMatch)
	if err != nil {
		panic(err)
	}
	return r
}

func (f *fakeStore) Users() *acl.Registry { return f.users }

func (f *fakeStore) ReadBatch(ctx context.Context, cmds [][][]byte, stale bool) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, len(cmds))
	f.stale = append(f.stale, stale)
	out := make([][]byte, len(cmds))
	for i, args := range cmds {
		out[i] = f.exec(args)
	}
	return out
}

// WriteIndexed knows no log index: WAIT is waitStore's.
func (f *fakeStore) WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	return f.Write(ctx, ops), 0
}

func (f *fakeStore) Wait(ctx context.Context, args [][]byte, index uint64) []byte {
	return command.Error("ERR unsupported by the fake store")
}

func (f *fakeStore) Internal(ctx context.Context, args [][]byte) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var words []string
	for _, a := range args {
		words = append(words, string(a))
	}
	f.internal = append(f.internal, strings.Join(words, " "))
	return command.Error("ERR unsupported by the fake store")
}

func (f *fakeStore) Write(ctx context.Context, ops []command.Op) [][]byte {
	if f.gate != nil {
		if f.entered != nil {
			f.entered <- struct{}{}
		}
		select {
		case <-f.gate:
		case <-ctx.Done():
			out := make([][]byte, len(ops))
			for i := range out {
				out[i] = command.Error(command.ErrClusterDown)
			}
			return out
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, len(ops))
	var kinds []command.OpKind
	for _, op := range ops {
		kinds = append(kinds, op.Kind)
	}
	f.kinds = append(f.kinds, kinds)
	out := make([][]byte, len(ops))
	for i, op := range ops {
		switch op.Kind {
		case command.OpCommand:
			out[i] = f.exec(op.Args)
		case command.OpReply:
			out[i] = op.Reply
		case command.OpTx:
			out[i] = f.tx(op.Tx)
		}
	}
	return out
}

func (f *fakeStore) tx(tx *command.Tx) []byte {
	for _, w := range tx.Watches {
		if f.stamps[string(w.Key)] != w.Stamp {
			return command.NullArray
		}
	}
	out := command.AppendArray(nil, len(tx.Ops))
	for _, op := range tx.Ops {
		if op.Kind == command.OpReply {
			out = append(out, op.Reply...)
		} else {
			out = append(out, f.exec(op.Args)...)
		}
	}
	return out
}

func (f *fakeStore) Watch(ctx context.Context, keys [][]byte) ([]command.Watch, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []command.Watch
	for _, k := range keys {
		_, exists := f.strs[string(k)]
		out = append(out, command.Watch{Key: k, Exists: exists || f.sets[string(k)] != nil, Stamp: f.stamps[string(k)]})
	}
	return out, nil
}

func (f *fakeStore) Admin(ctx context.Context, args [][]byte) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var words []string
	for _, a := range args {
		words = append(words, string(a))
	}
	f.admin = append(f.admin, strings.Join(words, " "))
	switch strings.ToLower(words[0]) {
	case "config":
		switch strings.ToLower(words[1]) {
		case "get":
			var out []byte
			n := 0
			for _, name := range slices.Sorted(maps.Keys(f.config)) {
				for _, p := range args[2:] {
					if glob.Match(p, []byte(name), true) {
						out = command.AppendBulkString(out, name)
						out = command.AppendBulkString(out, f.config[name])
						n++
						break
					}
				}
			}
			return append(command.AppendArray(nil, 2*n), out...)
		case "set":
			for i := 2; i+1 < len(words); i += 2 {
				if _, ok := f.config[strings.ToLower(words[i])]; !ok {
					return command.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + words[i] + "'")
				}
			}
			for i := 2; i+1 < len(words); i += 2 {
				f.config[strings.ToLower(words[i])] = words[i+1]
			}
			return command.OK
		case "resetstat":
			return command.OK
		}
	case "lastsave":
		return command.AppendInt(nil, 1700000000)
	}
	return command.Error("ERR unsupported by the fake store")
}

func (f *fakeStore) ClusterTime() time.Time { return time.Now() }

func (f *fakeStore) Info() []InfoSection {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []InfoSection{
		{Name: "Keyspace", Fields: [][2]string{{"db0", "keys=" + strconv.Itoa(len(f.sets)+len(f.strs)) + ",expires=0,avg_ttl=0"}}},
		{Name: "Raft", Fields: [][2]string{{"raft_state", "Leader"}}},
		{Name: "Replication", Fields: [][2]string{{"role", "master"}, {"connected_slaves", "0"}}},
		{Name: "Memory", Fields: [][2]string{{"used_memory", "1024"}}},
	}
}

func (f *fakeStore) touch(key string) {
	f.clock++
	f.stamps[key] = f.clock
}

// exec runs one data command; f.mu is held.
func (f *fakeStore) exec(args [][]byte) []byte {
	name := strings.ToLower(string(args[0]))
	key := ""
	if len(args) > 1 {
		key = string(args[1])
	}
	_, isStr := f.strs[key]
	_, isSet := f.sets[key]
	switch name {
	case "acl":
		if len(args) == 4 && strings.EqualFold(string(args[1]), "load") {
			if err := f.users.LoadFile(string(args[2]), args[3]); err != nil {
				return command.Error("ERR " + err.Error())
			}
			return command.OK
		}
		return f.users.Exec(nil, args, acl.Session{})
	case "sadd":
		if isStr {
			return command.Error(command.ErrWrongType)
		}
		s := f.sets[key]
		if s == nil {
			s = make(map[string]bool)
			f.sets[key] = s
		}
		n := 0
		for _, m := range args[2:] {
			if !s[string(m)] {
				s[string(m)] = true
				n++
			}
		}
		if n > 0 {
			f.touch(key)
		}
		return command.AppendInt(nil, int64(n))
	case "smembers":
		if isStr {
			return command.Error(command.ErrWrongType)
		}
		ms := slices.Sorted(maps.Keys(f.sets[key]))
		out := command.AppendArray(nil, len(ms))
		for _, m := range ms {
			out = command.AppendBulkString(out, m)
		}
		return out
	case "sismember":
		if isStr {
			return command.Error(command.ErrWrongType)
		}
		if f.sets[key][string(args[2])] {
			return command.One
		}
		return command.Zero
	case "scard":
		if isStr {
			return command.Error(command.ErrWrongType)
		}
		return command.AppendInt(nil, int64(len(f.sets[key])))
	case "get":
		if isSet {
			return command.Error(command.ErrWrongType)
		}
		if !isStr {
			return command.NullBulk
		}
		return command.AppendBulkString(nil, f.strs[key])
	case "set":
		if len(args) != 3 {
			return command.Error(command.ErrSyntax)
		}
		delete(f.sets, key)
		f.strs[key] = string(args[2])
		f.touch(key)
		return command.OK
	case "incr":
		if isSet {
			return command.Error(command.ErrWrongType)
		}
		n, err := strconv.ParseInt(f.strs[key], 10, 64)
		if isStr && err != nil {
			return command.Error(command.ErrNotInteger)
		}
		n++
		f.strs[key] = strconv.FormatInt(n, 10)
		f.touch(key)
		return command.AppendInt(nil, n)
	case "del":
		n := 0
		for _, k := range args[1:] {
			_, s1 := f.strs[string(k)]
			_, s2 := f.sets[string(k)]
			if s1 || s2 {
				delete(f.strs, string(k))
				delete(f.sets, string(k))
				f.touch(string(k))
				n++
			}
		}
		return command.AppendInt(nil, int64(n))
	case "exists":
		n := 0
		for _, k := range args[1:] {
			_, s1 := f.strs[string(k)]
			_, s2 := f.sets[string(k)]
			if s1 || s2 {
				n++
			}
		}
		return command.AppendInt(nil, int64(n))
	}
	return command.Error("ERR fake store does not implement '" + name + "'")
}

func (f *fakeStore) writeBatches() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.writes)
}

func (f *fakeStore) readBatches() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reads)
}
