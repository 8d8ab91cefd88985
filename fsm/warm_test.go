package fsm

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// TestWarmDecidesNothing applies a random log of entries big enough to be
// warmed (warmMin ops or more: commands of every kind, transactions, ops
// that are not commands, SPOP and evictions) to one FSM, and the same log to
// another with warming off: every reply, the keyspace with its versions and
// encodings, the dense key order and the digest are the same.
func TestWarmDecidesNothing(t *testing.T) {
	for seed := range uint64(3) {
		g := &logGen{t: t, r: rand.New(rand.NewPCG(seed, 11)), ref: newTestFSM(t), now: 1_000_000, term: 1}
		for range 300 {
			g.now += int64(g.r.IntN(400))
			ops := make([]command.Op, warmMin+g.r.IntN(3*warmMin))
			for i := range ops {
				switch g.r.IntN(12) {
				case 0:
					tx := &command.Tx{Watches: g.ref.WatchStamp(toArgs(g.key()))}
					tx.Ops = append(tx.Ops, g.op(g.command(true)), g.op(g.command(true)))
					ops[i] = command.Op{Kind: command.OpTx, Tx: tx}
				case 1:
					ops[i] = command.Op{Kind: command.OpReply, Reply: command.Error(command.ErrSyntax)}
				default:
					ops[i] = g.op(g.command(false))
				}
			}
			e := command.Entry{Type: command.TypeBatch, NowMs: g.now, Ops: ops}
			l := &raft.Log{Index: uint64(len(g.logs) + 1), Term: g.term, Type: raft.LogCommand, Data: e.Encode(nil)}
			g.logs = append(g.logs, l)
			g.outs = append(g.outs, g.ref.Apply(l).(*ApplyResult).Replies)
		}

		defer func(n int) { warmMin = n }(warmMin)
		warmMin = math.MaxInt
		cold := newTestFSM(t)
		var outs [][][]byte
		for _, l := range g.logs {
			outs = append(outs, cold.Apply(l).(*ApplyResult).Replies)
		}
		warmMin = 8

		if !equalReplies(outs, g.outs) {
			t.Fatalf("seed %d: replies differ with warming off", seed)
		}
		if a, b := dump(g.ref), dump(cold); a != b {
			t.Fatalf("seed %d: keyspace differs with warming off:\n%s", seed, diffLines(b, a))
		}
		if a, b := order(g.ref), order(cold); !slices.Equal(a, b) {
			t.Fatalf("seed %d: key order %q warmed, %q cold", seed, a, b)
		}
		if a, b := doCmd(t, g.ref, g.now, "DEBUG", "DIGEST"), doCmd(t, cold, g.now, "DEBUG", "DIGEST"); a != b {
			t.Fatalf("seed %d: digest %s warmed, %s cold", seed, a, b)
		}
	}
}

// TestWarmChangesNothing warms ops naming present keys of every type and
// encoding, absent keys, keys that sit in another key's home slot, ops
// without a key and ops that are not commands: the keyspace, its order and
// the next replies are untouched.
func TestWarmChangesNothing(t *testing.T) {
	f := newTestFSM(t)
	var keys []string
	for i := range 400 {
		k := "key:" + string(rune('a'+i%26)) + string(rune('0'+i%10)) + string(rune('A'+i/26))
		keys = append(keys, k)
		switch i % 5 {
		case 0:
			doCmd(t, f, 1000, "SADD", k, "1", "2", "3") // intset
		case 1:
			doCmd(t, f, 1000, "SADD", k, "a", "b") // listpack
		case 2:
			args := []string{"SADD", k}
			for j := range 200 {
				args = append(args, "member-"+string(rune('a'+j%26))+string(rune('a'+j/26)))
			}
			doCmd(t, f, 1000, args...) // hashtable
		case 3:
			doCmd(t, f, 1000, "SET", k, "v")
			doCmd(t, f, 1000, "PEXPIRE", k, "100000")
		case 4:
			doCmd(t, f, 1000, "SADD", k, "x")
			doCmd(t, f, 1000, "SREM", k, "x") // deleted: absent
		}
	}
	before, beforeOrder := dump(f), order(f)
	var ops []command.Op
	for _, k := range keys {
		ops = append(ops, command.Cmd(toArgs("SISMEMBER", k, "a")...), command.Cmd(toArgs("GET", k+"-absent")...))
	}
	ops = append(ops, command.Cmd(toArgs("PING")...), command.Op{Kind: command.OpReply, Reply: command.Error(command.ErrSyntax)})
	f.mu.Lock()
	f.warm(ops)
	f.warm(ops[:warmMin-1])
	f.mu.Unlock()
	if after := dump(f); after != before {
		t.Fatalf("warm changed the keyspace:\n%s", diffLines(after, before))
	}
	if after := order(f); !slices.Equal(after, beforeOrder) {
		t.Fatalf("warm changed the key order")
	}
	if got := doCmd(t, f, 1000, "SCARD", keys[2]); got != ":200\r\n" {
		t.Fatalf("SCARD after warm = %q", got)
	}
}
