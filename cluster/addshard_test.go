package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestAddShardRepeat: ADDSHARD ID <shard> sent twice through n4 (outside
// the metadata group: relayed), as a client sends it again after a lost
// reply, adds one shard and answers its id both times, also with the
// members in another order. Without ID the same members make another
// shard: three nodes may hold any number of shards, so only the id tells
// a repeat. Refused byte for byte: an id that is not the next one, an
// existing shard's id with other members, an id that is no integer.
func TestAddShardRepeat(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n2,n3,n4", 4)
	n1, n4 := hosts[0], hosts[3]
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"addshard", "id", "3", "n1", "n2", "n4"}, "-ERR ADDSHARD: the next shard id is 2, not 3\r\n"},
		{[]string{"addshard", "id", "1", "n1", "n2", "n4"}, "-ERR ADDSHARD: shard 1 exists with members n2,n3,n4\r\n"},
		{[]string{"addshard", "id", "02", "n1"}, "-ERR ADDSHARD ID wants a shard id (an integer) and the new shard's members\r\n"},
		{[]string{"addshard", "id", "n1", "n2"}, "-ERR ADDSHARD ID wants a shard id (an integer) and the new shard's members\r\n"},
		{[]string{"addshard", "id", "2"}, "-ERR ADDSHARD wants the new shard's members (node ids)\r\n"},
	} {
		if r := adminRetry(t, n4, append([]string{"raft.shard"}, tc.args...)...); r != tc.want {
			t.Errorf("RAFT.SHARD %s = %q, want %q", strings.Join(tc.args, " "), r, tc.want)
		}
	}

	before, err := n1.readMetaSettled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, members := range [][]string{{"n1", "n2", "n4"}, {"n1", "n2", "n4"}, {"n4", "n2", "n1"}} {
		if r := adminRetry(t, n4, append([]string{"raft.shard", "addshard", "id", "2"}, members...)...); r != ":2\r\n" {
			t.Errorf("RAFT.SHARD ADDSHARD ID 2 %s = %q, want :2", strings.Join(members, " "), r)
		}
	}
	after, err := n1.readMetaSettled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sh, ok := after.Shard(2); after.Epoch != before.Epoch+1 || len(after.Shards) != 3 || !ok || !slices.Equal(sh.Members, []string{"n1", "n2", "n4"}) {
		t.Errorf("map after ADDSHARD ID 2 and two repeats: %q, want one shard more at epoch %d", after.Encode(), before.Epoch+1)
	}
	for _, h := range []*Host{hosts[0], hosts[1], hosts[3]} {
		testutil.WaitFor(t, 10*time.Second, h.self+" to run shard 2", func() bool { _, ok := h.Node(2); return ok })
	}

	if r := adminRetry(t, n4, "raft.shard", "addshard", "n1", "n2", "n4"); r != ":3\r\n" {
		t.Errorf("RAFT.SHARD ADDSHARD n1 n2 n4 = %q, want :3 (another shard of the same members)", r)
	}
	if m, err := n1.readMetaSettled(ctx); err != nil || len(m.Shards) != 4 {
		t.Errorf("map after ADDSHARD without ID: %v (%v), want 4 shards", m, err)
	}
}
