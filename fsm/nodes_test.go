package fsm

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/snapshot"
)

// applyNode applies a TypeNode entry at the next index.
func applyNode(t testing.TB, f *FSM, id, addr string) {
	t.Helper()
	e := command.Entry{Type: command.TypeNode, Node: &command.NodeAddr{ID: id, Addr: addr}}
	l := &raft.Log{Index: f.AppliedIndex() + 1, Term: 1, Type: raft.LogCommand, Data: e.Encode(nil)}
	if res, ok := f.Apply(l).(*ApplyResult); !ok || len(res.Replies) != 0 {
		t.Fatalf("Apply(node entry) = %#v, want an empty *ApplyResult", res)
	}
	if got := f.AppliedIndex(); got != l.Index {
		t.Fatalf("AppliedIndex() after a node entry = %d, want %d", got, l.Index)
	}
}

func TestNodeEntries(t *testing.T) {
	f := newTestFSM(t)
	applyCmd(t, f, 1000, "sadd", "s", "a")
	digest := string(f.Read(toArgs("debug", "digest"), 0, nil, nil))
	applyNode(t, f, "n1", "10.0.0.1:6379")
	applyNode(t, f, "n2", "10.0.0.2:6379")
	applyNode(t, f, "n1", "10.0.0.9:6379")
	if got := f.ClientAddr("n1"); got != "10.0.0.9:6379" {
		t.Errorf("ClientAddr(n1) = %q, want the latest address", got)
	}
	if got := f.ClientAddr("n3"); got != "" {
		t.Errorf("ClientAddr(n3) = %q, want empty", got)
	}
	if got := string(f.Read(toArgs("debug", "digest"), 0, nil, nil)); got != digest {
		t.Errorf("DEBUG DIGEST changed with node entries: %q, want %q (addresses are not data)", got, digest)
	}
	if got := f.Stats().ClockMs; got != 1000 {
		t.Errorf("clock after node entries = %d, want 1000 (they carry none)", got)
	}
}

// Logs written before TypeNode carry addresses as "raftset.node id addr"
// command ops; replaying them must give the same map, and the same replies
// as then.
func TestLegacyNodeOps(t *testing.T) {
	f := newTestFSM(t)
	replies := applyEntry(t, f, 1000,
		command.Cmd(toArgs("sadd", "s", "a")...),
		command.Cmd(toArgs(command.LegacyNodeCommand, "n1", "10.0.0.1:6379")...),
		command.Cmd(toArgs(command.LegacyNodeCommand, "n2")...)) // malformed: ignored, as before
	if got := f.ClientAddr("n1"); got != "10.0.0.1:6379" {
		t.Errorf("ClientAddr(n1) = %q after a legacy op", got)
	}
	if got := f.ClientAddr("n2"); got != "" {
		t.Errorf("ClientAddr(n2) = %q after a malformed legacy op, want empty", got)
	}
	want := []string{":1\r\n",
		"-ERR unknown command 'raftset.node', with args beginning with: 'n1' '10.0.0.1:6379' \r\n",
		"-ERR unknown command 'raftset.node', with args beginning with: 'n2' \r\n"}
	for i := range want {
		if string(replies[i]) != want[i] {
			t.Errorf("reply %d = %q, want %q", i, replies[i], want[i])
		}
	}
}

func TestNodesInSnapshot(t *testing.T) {
	f := newTestFSM(t)
	applyCmd(t, f, 1000, "sadd", "s", "a")
	plain := persist(t, f)
	if bytes.Contains(plain, []byte(AuxNodes)) {
		t.Errorf("a snapshot without published addresses holds %s", AuxNodes)
	}
	f.SetSnapshotAux(func() []snapshot.AuxField {
		return []snapshot.AuxField{{Key: "raftset-members", Value: "voter:n1=x"}}
	})
	applyNode(t, f, "n2", "h2:2")
	applyNode(t, f, "n1", "h1:1")
	data := persist(t, f)
	r, err := snapshot.NewReader(bytes.NewReader(data), snapshot.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	aux := r.Aux()
	// Where and how earlier versions wrote it: after the caller's fields.
	if n := len(aux); n < 2 || aux[n-1] != (snapshot.AuxField{Key: AuxNodes, Value: "n1=h1:1,n2=h2:2"}) ||
		aux[n-2].Key != "raftset-members" {
		t.Errorf("AUX fields end with %+v, want raftset-members then %s=n1=h1:1,n2=h2:2", aux[max(0, n-2):], AuxNodes)
	}
	g := restored(t, data)
	if g.ClientAddr("n1") != "h1:1" || g.ClientAddr("n2") != "h2:2" {
		t.Errorf("restored addresses n1=%q n2=%q", g.ClientAddr("n1"), g.ClientAddr("n2"))
	}
	if got := g.RestoredAux(); len(got) != 1 || got[0].Key != "raftset-members" {
		t.Errorf("RestoredAux() = %+v, want only the caller's field", got)
	}
	// A restore replaces the map, as it replaces the keyspace.
	if err := g.Restore(nopCloser{bytes.NewReader(plain)}); err != nil {
		t.Fatal(err)
	}
	if got := g.ClientAddr("n1"); got != "" {
		t.Errorf("ClientAddr(n1) after restoring a snapshot without addresses = %q", got)
	}
}

// Snapshots written before the state machine owned the map carry it as an
// AUX field the cluster package added; they restore the same way.
func TestNodesFromOldSnapshot(t *testing.T) {
	old := newTestFSM(t)
	applyCmd(t, old, 1000, "sadd", "s", "a")
	old.SetSnapshotAux(func() []snapshot.AuxField {
		return []snapshot.AuxField{{Key: "raftset-members", Value: "voter:n1=x"}, {Key: "raftset-nodes", Value: "n1=h1:1,n2=h2:2"}}
	})
	g := restored(t, persist(t, old))
	if g.ClientAddr("n1") != "h1:1" || g.ClientAddr("n2") != "h2:2" {
		t.Errorf("addresses from an old snapshot: n1=%q n2=%q", g.ClientAddr("n1"), g.ClientAddr("n2"))
	}
}

// An entry that does not decode stops the state machine: no panic, nothing
// applied from it on, and a snapshot cannot claim the indexes it skipped.
func TestApplyUndecodable(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		text string
	}{
		{"corrupt", []byte{1, byte(command.TypeBatch), 0xff}, "corrupt entry (format version 1)"},
		{"newer", []byte{command.Version + 1, 1, 0, 0},
			"entry written by a newer raftset (format version 4, this binary reads up to 3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			f := New(Config{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
			applyCmd(t, f, 1000, "sadd", "s", "a")
			ok := command.Entry{Type: command.TypeBatch, NowMs: 1000, Ops: []command.Op{command.Cmd(toArgs("sadd", "s", "b")...)}}
			batch := []*raft.Log{
				{Index: 2, Term: 3, Type: raft.LogCommand, Data: ok.Encode(nil)},
				{Index: 3, Term: 3, Type: raft.LogCommand, Data: c.data},
				{Index: 4, Term: 3, Type: raft.LogCommand, Data: ok.Encode(nil)},
			}
			out := f.ApplyBatch(batch)
			if _, isRes := out[0].(*ApplyResult); !isRes || out[1] != nil || out[2] != nil {
				t.Errorf("ApplyBatch = %#v, want a result for the entry before the bad one only", out)
			}
			if got := f.AppliedIndex(); got != 2 {
				t.Errorf("AppliedIndex() = %d, want 2 (the entry before the bad one)", got)
			}
			select {
			case <-f.Halted():
			default:
				t.Fatal("Halted() not closed")
			}
			err := f.HaltErr()
			var de *command.DecodeError
			if !errors.Is(err, ErrHalted) || !errors.As(err, &de) || !strings.Contains(err.Error(), "entry 3 (term 3)") ||
				!strings.Contains(err.Error(), c.text) {
				t.Errorf("HaltErr() = %v, want ErrHalted, entry 3 (term 3) and %q", err, c.text)
			}
			if s := logs.String(); !strings.Contains(s, "index=3") || !strings.Contains(s, "term=3") ||
				!strings.Contains(s, "format_version="+string('0'+rune(c.data[0]))) {
				t.Errorf("log = %q, want index, term and format version", s)
			}
			// Later entries are not applied, not even one by one.
			if got := f.Apply(batch[2]); got != nil {
				t.Errorf("Apply after halting = %#v, want nil", got)
			}
			if got := string(f.Read(toArgs("scard", "s"), 0, nil, nil)); got != ":2\r\n" {
				t.Errorf("SCARD s = %q, want :2 (the entries before the bad one)", got)
			}
			if _, err := f.Snapshot(); !errors.Is(err, ErrHalted) {
				t.Errorf("Snapshot after halting: %v, want ErrHalted", err)
			}
			if err := f.Restore(nopCloser{bytes.NewReader(nil)}); !errors.Is(err, ErrHalted) {
				t.Errorf("Restore after halting: %v, want ErrHalted", err)
			}
		})
	}
}

func TestHaltErrNilWhileApplying(t *testing.T) {
	f := newTestFSM(t)
	applyCmd(t, f, 1000, "sadd", "s", "a")
	if err := f.HaltErr(); err != nil {
		t.Errorf("HaltErr() = %v on a healthy state machine", err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
