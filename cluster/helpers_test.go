package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/setenc"
	"raftset/internal/testutil"
)

func fastConfig(t testing.TB, id string) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.InMemory = true
	cfg.Bootstrap = true
	cfg.HeartbeatTimeout = 50 * time.Millisecond
	cfg.ElectionTimeout = 50 * time.Millisecond
	cfg.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.Logger = testutil.Logger(t, t.Name())
	return cfg
}

// mustNode starts a node on f and waits until it leads (single node) when
// lead is set. The node is closed at cleanup.
func mustNode(t testing.TB, cfg Config, f stateMachine, lead bool) *Node {
	t.Helper()
	n, err := newNode(cfg, f)
	if err != nil {
		t.Fatalf("newNode: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	if lead {
		testutil.WaitFor(t, 5*time.Second, "leadership", n.IsLeader)
	}
	return n
}

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

func cmd(s ...string) command.Op { return command.Cmd(args(s...)...) }

// fakeFSM is a small deterministic state machine with the fsm.FSM method
// set: sets of strings with optional deadlines. Commands: SADD, SREM, DEL,
// PEXPIREAT (EXPIRE is rewritten by Prepare), raftset.expire, config set.
// Reads: SMEMBERS, SCARD, EXISTS, DBSIZE.
type fakeFSM struct {
	mu       sync.Mutex
	sets     map[string]map[string]bool
	deadline map[string]int64
	limits   setenc.Limits
	now      int64
	applied  uint64
	entries  int // command entries applied
	changed  chan struct{}
	// restoreErr makes Restore fail (a snapshot the FSM refuses).
	restoreErr error
	nodes      map[string]string // published client addresses (meta_test.go)
}

func newFakeFSM() *fakeFSM {
	return &fakeFSM{
		sets:     map[string]map[string]bool{},
		deadline: map[string]int64{},
		limits:   setenc.DefaultLimits(),
		changed:  make(chan struct{}),
	}
}

var _ stateMachine = (*fakeFSM)(nil)

func (f *fakeFSM) Clock() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeFSM) Apply(l *raft.Log) any {
	e, err := command.Decode(l.Data)
	if err != nil {
		panic(fmt.Errorf("fake fsm: decode entry %d: %w", l.Index, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Node != nil {
		f.setNode(e.Node)
	}
	if e.NowMs > f.now {
		f.now = e.NowMs
	}
	res := &fsm.ApplyResult{Replies: make([][]byte, len(e.Ops))}
	for i, op := range e.Ops {
		switch op.Kind {
		case command.OpCommand:
			res.Replies[i] = f.exec(op.Args)
		case command.OpReply:
			res.Replies[i] = op.Reply
		case command.OpTx:
			out := command.AppendArray(nil, len(op.Tx.Ops))
			for _, in := range op.Tx.Ops {
				if in.Kind == command.OpReply {
					out = append(out, in.Reply...)
				} else {
					out = append(out, f.exec(in.Args)...)
				}
			}
			res.Replies[i] = out
		}
	}
	f.entries++
	f.applied = l.Index
	close(f.changed)
	f.changed = make(chan struct{})
	return res
}

func (f *fakeFSM) live(key string) bool {
	if _, ok := f.sets[key]; !ok {
		return false
	}
	if d, ok := f.deadline[key]; ok && d <= f.now {
		return false
	}
	return true
}

func (f *fakeFSM) exec(a [][]byte) []byte {
	name := strings.ToLower(string(a[0]))
	switch name {
	case "sadd":
		k := string(a[1])
		if !f.live(k) {
			f.sets[k] = map[string]bool{}
			delete(f.deadline, k)
		}
		added := 0
		for _, m := range a[2:] {
			if !f.sets[k][string(m)] {
				f.sets[k][string(m)] = true
				added++
			}
		}
		return command.AppendInt(nil, int64(added))
	case "srem":
		k := string(a[1])
		if !f.live(k) {
			return command.Zero
		}
		removed := 0
		for _, m := range a[2:] {
			if f.sets[k][string(m)] {
				delete(f.sets[k], string(m))
				removed++
			}
		}
		if len(f.sets[k]) == 0 {
			delete(f.sets, k)
			delete(f.deadline, k)
		}
		return command.AppendInt(nil, int64(removed))
	case "del":
		d := 0
		for _, k := range a[1:] {
			if f.live(string(k)) {
				d++
			}
			delete(f.sets, string(k))
			delete(f.deadline, string(k))
		}
		return command.AppendInt(nil, int64(d))
	case "pexpireat":
		k := string(a[1])
		if !f.live(k) {
			return command.Zero
		}
		at, _ := strconv.ParseInt(string(a[2]), 10, 64)
		f.deadline[k] = at
		return command.One
	case "raftset.expire":
		d := 0
		for _, k := range a[1:] {
			if dl, ok := f.deadline[string(k)]; ok && dl <= f.now {
				delete(f.sets, string(k))
				delete(f.deadline, string(k))
				d++
			}
		}
		return command.AppendInt(nil, int64(d))
	case "config":
		v, err := strconv.Atoi(string(a[3]))
		if err != nil {
			return command.Error("ERR bad value")
		}
		switch string(a[2]) {
		case "set-max-intset-entries":
			f.limits.MaxIntsetEntries = v
		case "set-max-listpack-entries":
			f.limits.MaxListpackEntries = v
		case "set-max-listpack-value":
			f.limits.MaxListpackValue = v
		default:
			return command.Error("ERR unknown parameter")
		}
		return command.OK
	}
	return command.Error("ERR fake fsm cannot apply " + name)
}

func (f *fakeFSM) Prepare(a [][]byte, nowMs int64) command.Op {
	switch strings.ToLower(string(a[0])) {
	case "sadd", "srem", "del", "pexpireat":
		return command.Cmd(a...)
	case "expire":
		secs, err := strconv.ParseInt(string(a[2]), 10, 64)
		if err != nil {
			return command.Op{Kind: command.OpReply, Reply: command.Error(command.ErrNotInteger)}
		}
		return command.Cmd(args("pexpireat", string(a[1]), strconv.FormatInt(nowMs+secs*1000, 10))...)
	}
	return command.Op{Kind: command.OpReply, Reply: command.Error(command.ErrSyntax)}
}

func (f *fakeFSM) Read(a [][]byte, nowMs int64, src setenc.Source, dst []byte) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	saved := f.now
	if nowMs > f.now {
		f.now = nowMs
	}
	defer func() { f.now = saved }()
	switch strings.ToLower(string(a[0])) {
	case "smembers":
		if !f.live(string(a[1])) {
			return command.AppendArray(dst, 0)
		}
		ms := make([]string, 0, len(f.sets[string(a[1])]))
		for m := range f.sets[string(a[1])] {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		dst = command.AppendArray(dst, len(ms))
		for _, m := range ms {
			dst = command.AppendBulkString(dst, m)
		}
		return dst
	case "scard":
		if !f.live(string(a[1])) {
			return command.AppendInt(dst, 0)
		}
		return command.AppendInt(dst, int64(len(f.sets[string(a[1])])))
	case "exists":
		return command.AppendInt(dst, int64(map[bool]int{true: 1}[f.live(string(a[1]))]))
	case "dbsize":
		return command.AppendInt(dst, int64(len(f.sets)))
	case "debug":
		return command.AppendBulkString(dst, fmt.Sprintf("digest-%d", len(f.sets)))
	}
	return command.Error("ERR fake fsm cannot read " + string(a[0]))
}

func (f *fakeFSM) WatchStamp(keys [][]byte) []command.Watch {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]command.Watch, len(keys))
	for i, k := range keys {
		out[i] = command.Watch{Key: k, Exists: f.live(string(k)), Stamp: f.applied}
	}
	return out
}

func (f *fakeFSM) ExpiredKeys(nowMs int64, max int) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]byte
	for k, d := range f.deadline {
		if d <= nowMs && len(out) < max {
			out = append(out, []byte(k))
		}
	}
	return out
}

func (f *fakeFSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		applied, ch := f.applied, f.changed
		f.mu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *fakeFSM) AppliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *fakeFSM) Limits() setenc.Limits {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limits
}

func (f *fakeFSM) KeyspaceCounts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sets), len(f.deadline)
}

func (f *fakeFSM) entryCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.entries
}

// fakeState is the fake's snapshot format.
type fakeState struct {
	Sets     map[string][]string
	Deadline map[string]int64
	Now      int64
	Nodes    map[string]string
}

func (f *fakeFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := fakeState{Sets: map[string][]string{}, Deadline: map[string]int64{}, Now: f.now, Nodes: f.nodes}
	for k, s := range f.sets {
		for m := range s {
			st.Sets[k] = append(st.Sets[k], m)
		}
	}
	for k, d := range f.deadline {
		st.Deadline[k] = d
	}
	b, err := json.Marshal(st)
	return fakeSnapshot(b), err
}

func (f *fakeFSM) WriteRDB(w io.Writer) error {
	s, err := f.Snapshot()
	if err != nil {
		return err
	}
	_, err = w.Write(s.(fakeSnapshot))
	return err
}

func (f *fakeFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if f.restoreErr != nil {
		return f.restoreErr
	}
	var st fakeState
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return fmt.Errorf("fake fsm: restore: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = map[string]map[string]bool{}
	for k, ms := range st.Sets {
		f.sets[k] = map[string]bool{}
		for _, m := range ms {
			f.sets[k][m] = true
		}
	}
	f.deadline = st.Deadline
	if f.deadline == nil {
		f.deadline = map[string]int64{}
	}
	f.now = st.Now
	f.nodes = st.Nodes
	return nil
}

type fakeSnapshot []byte

func (s fakeSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fakeSnapshot) Release() {}

var errRefused = errors.New("fake fsm: refused snapshot")
