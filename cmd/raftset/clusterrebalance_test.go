package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"raftset/cluster"
)

func TestWaitMap(t *testing.T) {
	// The nth RAFT.SHARD MAP answers a map of epoch n; done sees it.
	epochMap := func(n int) []byte {
		s := fmt.Sprintf("epoch %d\nshard 0:0-16383:n1\n", n)
		return fmt.Appendf(nil, "$%d\r\n%s\r\n", len(s), s)
	}
	tests := []struct {
		name  string
		reply func(n int) []byte
		// done is asked on the nth map; cancel ends the wait's context.
		done      func(m *cluster.ShardMap, cancel func()) bool
		want      string // the error; empty: none
		wantReads int
	}{
		{
			name:      "shown at once",
			reply:     epochMap,
			done:      func(m *cluster.ShardMap, _ func()) bool { return m.Epoch == 1 },
			wantReads: 1,
		},
		{
			name:      "shown on the third read",
			reply:     epochMap,
			done:      func(m *cluster.ShardMap, _ func()) bool { return m.Epoch == 3 },
			wantReads: 3,
		},
		{
			name:  "context ends first",
			reply: epochMap,
			done: func(m *cluster.ShardMap, cancel func()) bool {
				if m.Epoch == 2 {
					cancel()
				}
				return false
			},
			want:      "waiting for the map to show epoch 9: context canceled",
			wantReads: 2,
		},
		{
			name:      "map unreadable",
			reply:     func(int) []byte { return []byte("-ERR no map here\r\n") },
			done:      func(*cluster.ShardMap, func()) bool { return true },
			want:      "RAFT.SHARD MAP: ERR no map here",
			wantReads: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reads atomic.Int32
			srv := startFakeRESP(t, func(cmd []string) []byte {
				if strings.Join(cmd, " ") != "RAFT.SHARD MAP" {
					return []byte("-ERR unexpected\r\n")
				}
				return tt.reply(int(reads.Add(1)))
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ac, err := dialAdmin(ctx, srv.addr(), "")
			if err != nil {
				t.Fatal(err)
			}
			defer ac.close()
			err = waitMap(ac, "epoch 9", func(m *cluster.ShardMap) bool { return tt.done(m, cancel) })
			if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
				t.Errorf("waitMap() = %v, want %q", err, tt.want)
			}
			if got := int(reads.Load()); got != tt.wantReads {
				t.Errorf("waitMap() read the map %d times, want %d", got, tt.wantReads)
			}
		})
	}
}

func TestPrintReplicaPlan(t *testing.T) {
	m, err := cluster.DecodeShardMap("epoch 3\nshard 0:0-8191:n1,n2,n3\nshard 1:8192-16383:n1,n2,n3\nnode n4 h:1 h:2\n")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		moves []cluster.ReplicaMovePlan
		want  string
	}{
		{name: "nothing to move", want: "replicas per node: n1=2 n2=2 n3=2 n4=0\n"},
		{
			name:  "moves",
			moves: []cluster.ReplicaMovePlan{{Shard: 1, From: "n1", To: "n4"}, {Shard: 0, From: "n2", To: "n4"}},
			want: "move shard 1's replica from n1 to n4\nmove shard 0's replica from n2 to n4\n" +
				"replicas per node: n1=1 n2=1 n3=2 n4=2\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printReplicaPlan(&out, m, tt.moves)
			if out.String() != tt.want {
				t.Errorf("printReplicaPlan() printed %q, want %q", out.String(), tt.want)
			}
		})
	}
}
