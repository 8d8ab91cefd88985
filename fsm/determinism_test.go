package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/script"
)

// logGen builds a random log of mixed commands against a reference FSM (the
// "leader"): writes go through Prepare on the leader's clock, transactions
// carry WATCH stamps taken from the reference state, and the clock sometimes
// runs backwards across "leader changes".
type logGen struct {
	t    *testing.T
	r    *rand.Rand
	ref  *FSM
	now  int64
	term uint64
	logs []*raft.Log
	outs [][][]byte // the reference FSM's replies, per entry
}

var genKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}

func (g *logGen) key() string { return genKeys[g.r.IntN(len(genKeys))] }

func (g *logGen) member() string {
	switch g.r.IntN(10) {
	case 0:
		return fmt.Sprintf("long-%s-%d", bytes.Repeat([]byte("x"), 60), g.r.IntN(5))
	case 1, 2, 3:
		return strconv.Itoa(g.r.IntN(40) - 10)
	case 4:
		return strconv.Itoa(g.r.IntN(1 << 20))
	default:
		return fmt.Sprintf("m%d", g.r.IntN(60))
	}
}

func (g *logGen) members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = g.member()
	}
	return out
}

// command returns a random command (a read one only when tx is set).
func (g *logGen) command(tx bool) []string {
	k := g.key()
	if tx && g.r.IntN(3) == 0 {
		switch g.r.IntN(7) {
		case 0:
			return []string{"srandmember", k, strconv.Itoa(g.r.IntN(9) - 4)}
		case 1:
			return []string{"srandmember", k}
		case 2:
			return []string{"randomkey"}
		case 3:
			return []string{"sscan", k, strconv.Itoa(g.r.IntN(50)), "count", "3"}
		case 4:
			return []string{"smembers", k}
		case 5:
			return []string{"scan", strconv.Itoa(g.r.IntN(12)), "count", "4"}
		default:
			return []string{"pttl", k}
		}
	}
	switch g.r.IntN(35) {
	case 0, 1, 2, 3:
		n := 1 + g.r.IntN(4)
		if g.r.IntN(15) == 0 {
			n = 130
		}
		return append([]string{"sadd", k}, g.members(n)...)
	case 4:
		return append([]string{"srem", k}, g.members(1+g.r.IntN(3))...)
	case 5:
		return []string{"spop", k}
	case 6:
		return []string{"spop", k, strconv.Itoa(g.r.IntN(8))}
	case 7:
		return []string{"smove", k, g.key(), g.member()}
	case 8:
		return []string{"sinterstore", k, g.key(), g.key()}
	case 9:
		return []string{"sunionstore", k, g.key(), g.key()}
	case 10:
		return []string{"sdiffstore", k, g.key(), g.key()}
	case 11:
		return []string{"del", k}
	case 12:
		return []string{"rename", k, g.key()}
	case 13:
		return []string{"expire", k, strconv.Itoa(g.r.IntN(20) - 2)}
	case 14:
		return []string{"pexpire", k, strconv.Itoa(g.r.IntN(3000)), "gt"}
	case 15:
		return []string{"persist", k}
	case 16:
		return []string{"set", k, g.member(), "px", strconv.Itoa(1 + g.r.IntN(5000))}
	case 17:
		return []string{"incr", k}
	case 18:
		return []string{"getdel", k}
	case 19:
		return append([]string{CmdExpire}, g.key(), g.key())
	case 20:
		params := []string{"set-max-intset-entries", "set-max-listpack-entries", "set-max-listpack-value"}
		return []string{"config", "set", params[g.r.IntN(3)], strconv.Itoa(g.r.IntN(16))}
	case 21:
		if g.r.IntN(10) == 0 {
			return []string{"flushdb"}
		}
		return []string{"spop", k, "1"}
	case 22:
		return []string{"getex", k, "ex", strconv.Itoa(1 + g.r.IntN(5))}
	case 23, 24:
		body := g.script()
		if g.r.IntN(3) == 0 {
			return []string{"evalsha", script.SHA1Hex([]byte(body)), "2", k, g.key()}
		}
		return []string{"eval", body, "2", k, g.key()}
	case 25:
		switch g.r.IntN(8) {
		case 0:
			return []string{"script", "flush"}
		default:
			return []string{"script", "load", g.script()}
		}
	case 26:
		if g.r.IntN(4) == 0 {
			return []string{"config", "set", "maxmemory-policy", policyNames[g.r.IntN(len(policyNames))],
				"maxmemory", strconv.Itoa(g.r.IntN(1 << 20))}
		}
		// The leader's eviction: the key's current version, or a stale one
		// (the key changed after it was picked) that must leave it alone.
		ver := g.ref.WatchStamp(toArgs(k))[0].Stamp
		if g.r.IntN(3) == 0 {
			ver++
		}
		return []string{CmdEvict, k, strconv.FormatUint(ver, 10)}
	case 27:
		return []string{"append", k, g.member()}
	case 28:
		return []string{"setrange", k, strconv.Itoa(g.r.IntN(20)), g.member()}
	case 29:
		return []string{"incrbyfloat", k, []string{"0.1", "-1.5", "1e3"}[g.r.IntN(3)]}
	case 30:
		return []string{"copy", k, g.key(), "replace"}
	case 31:
		return []string{"sort", k, "by", "nosort", "store", g.key()}
	case 32:
		return []string{"sort", k, "alpha", "limit", "0", "3"}
	case 33:
		return []string{"getset", k, g.member()}
	case 34:
		return []string{"msetnx", k, g.member(), g.key(), g.member()}
	default:
		return []string{"srandmember", k, "3"} // a read as a plain op of an entry
	}
}

// scriptParts are pieces of random scripts: random numbers, SPOP, table
// iteration, cjson, tostring of tables, TIME, errors after writes, pcall.
var scriptParts = []string{
	"redis.call('sadd', KEYS[1], tostring(math.random(1000)))",
	"redis.call('spop', KEYS[1])",
	"local m = redis.pcall('smembers', KEYS[2]) if type(m) == 'table' then for i, v in ipairs(m) do redis.call('sadd', KEYS[1], v .. i) end end",
	"redis.call('set', KEYS[2], cjson.encode({a = math.random(), b = {1, 2, KEYS[1]}, c = {x = 1, y = 2}}))",
	"local t = {} for k in pairs({x = 1, y = 2, [3] = 3, z = 4}) do t[#t + 1] = tostring(k) end redis.call('set', KEYS[1], table.concat(t, ','))",
	"redis.pcall('incr', KEYS[1])",
	"redis.call('set', KEYS[1], tostring({}) .. tostring(math.random()))",
	"redis.pcall('pexpire', KEYS[1], math.random(5000))",
	"if redis.call('exists', KEYS[1]) == 1 then redis.call('del', KEYS[2]) end",
	"redis.call('set', KEYS[2], redis.call('time')[2])",
	"if math.random(4) == 1 then error('boom') end",
	"local n = 0 for i = 1, math.random(100) do n = n + i end redis.pcall('sadd', KEYS[2], n)",
	"redis.setresp(3) local m = redis.pcall('smembers', KEYS[2]) if type(m) == 'table' and m['set'] then for k in pairs(m['set']) do redis.call('sadd', KEYS[1], k .. 'r3') end end redis.setresp(2)",
	"redis.call('set', KEYS[1], struct.pack('>i d s', math.random(1000), math.random(), KEYS[2]))",
}

func (g *logGen) script() string {
	n := 1 + g.r.IntN(4)
	parts := make([]string, 0, n+1)
	for range n {
		parts = append(parts, scriptParts[g.r.IntN(len(scriptParts))])
	}
	return strings.Join(append(parts, "return redis.pcall('scard', KEYS[1])"), "\n")
}

// op turns a command into the op the leader proposes.
func (g *logGen) op(args []string) command.Op {
	argv := toArgs(args...)
	if def := g.ref.lookupCmd(argv[0]); def != nil && def.write {
		return g.ref.Prepare(argv, g.now)
	}
	return command.Cmd(argv...)
}

func (g *logGen) entry() {
	g.now += int64(g.r.IntN(400))
	if g.r.IntN(50) == 0 {
		g.term++
		g.now -= int64(g.r.IntN(3000)) // the new leader's clock is behind
	}
	var ops []command.Op
	for range 1 + g.r.IntN(4) {
		switch g.r.IntN(12) {
		case 0:
			tx := &command.Tx{}
			if g.r.IntN(2) == 0 {
				tx.Watches = g.ref.WatchStamp(toArgs(g.key(), g.key()))
			}
			for range 1 + g.r.IntN(4) {
				tx.Ops = append(tx.Ops, g.op(g.command(true)))
			}
			ops = append(ops, command.Op{Kind: command.OpTx, Tx: tx})
		case 1:
			ops = append(ops, command.Op{Kind: command.OpReply, Reply: command.Error(command.ErrSyntax)})
		default:
			ops = append(ops, g.op(g.command(false)))
		}
	}
	e := command.Entry{Type: command.TypeBatch, NowMs: g.now, Ops: ops}
	l := &raft.Log{Index: uint64(len(g.logs) + 1), Term: g.term, Type: raft.LogCommand, Data: e.Encode(nil)}
	g.logs = append(g.logs, l)
	g.outs = append(g.outs, g.ref.Apply(l).(*ApplyResult).Replies)
}

func genLog(t *testing.T, seed uint64, n int) *logGen {
	g := &logGen{t: t, r: rand.New(rand.NewPCG(seed, 7)), ref: newTestFSM(t), now: 1_000_000, term: 1}
	for range n {
		g.entry()
	}
	return g
}

// applyLogs applies logs to f in batches, as Raft's BatchingFSM path does,
// and returns the replies per entry.
func applyLogs(f *FSM, logs []*raft.Log) [][][]byte {
	var out [][][]byte
	for len(logs) > 0 {
		n := min(len(logs), 7)
		for _, r := range f.ApplyBatch(logs[:n]) {
			out = append(out, r.(*ApplyResult).Replies)
		}
		logs = logs[n:]
	}
	return out
}

// TestDeterminism is the proof docs/invariants.md §3 asks for: a random log of mixed
// commands (SPOP, SRANDMEMBER and RANDOMKEY inside MULTI, EXPIRE, *STORE,
// CONFIG SET of the limits, active expiry, clock going backwards...) fed to
// two FSMs, one of them snapshotted halfway while it keeps applying and a
// third FSM restored from that snapshot: every reply after the snapshot, the
// final DEBUG DIGEST, the whole keyspace with encodings, blobs, member order
// and versions, the dense key order and the snapshot bytes are identical.
func TestDeterminism(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := genLog(t, seed, 1500)
			half := len(g.logs) / 2

			// The reference ran Apply one entry at a time; b applies in batches.
			b := newTestFSM(t)
			if got := applyLogs(b, g.logs[:half]); !equalReplies(got, g.outs[:half]) {
				t.Fatal("replies of batched apply differ from Apply's")
			}
			snap, err := b.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			atCapture, orderAtCapture := dump(b), order(b)
			applyLogs(b, g.logs[half:]) // changes the shared sets before Persist
			sink := &memSink{}
			if err := snap.Persist(sink); err != nil {
				t.Fatal(err)
			}
			snap.Release()

			c := restored(t, sink.Bytes())
			if got := dump(c); got != atCapture {
				t.Fatalf("restored state differs from the state at capture:\n%s", diffLines(got, atCapture))
			}
			if got := order(c); !slices.Equal(got, orderAtCapture) {
				t.Fatalf("restored key order %q, want %q", got, orderAtCapture)
			}
			if got := c.AppliedIndex(); got != uint64(half) {
				t.Errorf("restored AppliedIndex() = %d, want %d", got, half)
			}
			got := applyLogs(c, g.logs[half:])
			for i := range got {
				if !equalReplies(got[i:i+1], g.outs[half+i:half+i+1]) {
					t.Fatalf("entry %d: restored FSM replied %q, the reference %q", half+i+1, got[i], g.outs[half+i])
				}
			}
			for _, f := range []*FSM{b, c} {
				if got, want := dump(f), dump(g.ref); got != want {
					t.Fatalf("final state differs:\n%s", diffLines(got, want))
				}
				if got, want := order(f), order(g.ref); !slices.Equal(got, want) {
					t.Fatalf("final key order %q, want %q", got, want)
				}
				if got, want := doCmd(t, f, 0, "debug", "digest"), doCmd(t, g.ref, 0, "debug", "digest"); got != want {
					t.Fatalf("DEBUG DIGEST = %s, want %s", got, want)
				}
				checkAccounting(t, f)
				if got, want := f.UsedMemory(), g.ref.UsedMemory(); got != want {
					t.Fatalf("UsedMemory() = %d, the reference's %d: the accounting depends on more than the data", got, want)
				}
				if got, want := f.EvictConfig(), g.ref.EvictConfig(); got != want {
					t.Fatalf("EvictConfig() = %+v, want %+v", got, want)
				}
			}
			if !bytes.Equal(persist(t, c), persist(t, g.ref)) {
				t.Error("snapshots of equal states differ in bytes")
			}
			st := g.ref.Stats()
			t.Logf("final: %d keys (%d strings, %d intsets, %d listpacks, %d hashtables), %d with a deadline",
				st.Keys, st.Strings, st.Intsets, st.Listpacks, st.Hashtables, st.Expires)
		})
	}
}

func equalReplies(a, b [][][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y [][]byte) bool { return slices.EqualFunc(x, y, bytes.Equal) })
}

func diffLines(got, want string) string {
	g, w := bytes.Split([]byte(got), []byte("\n")), bytes.Split([]byte(want), []byte("\n"))
	var out bytes.Buffer
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			fmt.Fprintf(&out, "line %d:\n  got:  %s\n  want: %s\n", i+1, gl, wl)
			if out.Len() > 4000 {
				break
			}
		}
	}
	return out.String()
}

// TestConcurrentPersist persists a snapshot on another goroutine while
// entries are applied and reads run, as Raft and the front end do; run with
// -race. The file still holds the state at capture.
func TestConcurrentPersist(t *testing.T) {
	g := genLog(t, 99, 1200)
	f := newTestFSM(t)
	half := len(g.logs) / 2
	applyLogs(f, g.logs[:half])
	atCapture := dump(f)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	persisted := make(chan error)
	go func() { persisted <- snap.Persist(sink) }()
	stop := make(chan struct{})
	readers := make(chan struct{})
	go func() {
		defer close(readers)
		src := newTestSource(1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.Read(toArgs("smembers", "k1"), 0, src, nil)
			f.Read(toArgs("scan", "0", "count", "5"), 0, src, nil)
			f.WatchStamp(toArgs("k2"))
			f.ExpiredKeys(2_000_000, 5)
			f.Stats()
		}
	}()
	for _, l := range g.logs[half:] {
		f.Apply(l)
	}
	if err := <-persisted; err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-readers
	snap.Release()
	if got := dump(restored(t, sink.Bytes())); got != atCapture {
		t.Fatalf("snapshot persisted concurrently differs from the state at capture:\n%s", diffLines(got, atCapture))
	}
	if got, want := dump(f), dump(g.ref); got != want {
		t.Fatalf("final state differs:\n%s", diffLines(got, want))
	}
}
