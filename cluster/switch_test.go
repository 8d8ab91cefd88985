package cluster

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/internal/testutil"
)

// After a leadership transfer every node publishes +switch-master with the
// master name clients asked about, and go-redis's failover client, which
// subscribes to it, moves its connections to the new leader (without the
// message they would stay on the old one, now a forwarding follower).
func TestSwitchMasterAfterTransfer(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	c.published()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target, watcher := c.followers(l)[0], c.followers(l)[1]

	// A Sentinel subscriber, as the failover client makes one.
	sc := redis.NewSentinelClient(&redis.Options{Addr: watcher.cfg.ClientAddr})
	defer sc.Close()
	lhost, lport, _ := net.SplitHostPort(l.cfg.ClientAddr)
	if addr, err := sc.GetMasterAddrByName(ctx, "raftset").Result(); err != nil || len(addr) != 2 || addr[0] != lhost || addr[1] != lport {
		t.Fatalf("SENTINEL get-master-addr-by-name = %q, %v; want %s", addr, err, l.cfg.ClientAddr)
	}
	ps := sc.Subscribe(ctx, "+switch-master")
	defer ps.Close()
	if sub, err := ps.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE +switch-master: %v", err)
	} else if s, ok := sub.(*redis.Subscription); !ok || s.Kind != "subscribe" || s.Channel != "+switch-master" || s.Count != 1 {
		t.Fatalf("SUBSCRIBE +switch-master confirmation = %#v", sub)
	}

	var sentinels []string
	for _, m := range c.members {
		sentinels = append(sentinels, m.cfg.ClientAddr)
	}
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "raftset",
		SentinelAddrs: sentinels,
		PoolSize:      1, // one connection, kept unless the client is told to move
	})
	defer rdb.Close()
	role := func() string {
		r, err := rdb.Do(ctx, "ROLE").Slice()
		if err != nil || len(r) == 0 {
			return "error: " + err.Error()
		}
		s, _ := r[0].(string)
		return s
	}
	if err := rdb.SAdd(ctx, "s", "before").Err(); err != nil {
		t.Fatalf("SADD through the failover client: %v", err)
	}
	if got := role(); got != "master" {
		t.Fatalf("failover client ROLE before the transfer = %q", got)
	}
	// The failover client subscribes to +switch-master on the sentinel
	// that answered it, without waiting for the confirmation: until that
	// node has taken the SUBSCRIBE, a switch would pass the client by (CI
	// once transferred first, and the client stayed on the old leader).
	// Its connection subscribes to two channels; the test's own to one.
	var admins []*testutil.RESPClient
	for _, m := range c.members {
		admins = append(admins, dialMember(t, m))
	}
	testutil.WaitFor(t, 10*time.Second, "the failover client's +switch-master subscription", func() bool {
		for _, a := range admins {
			if list, err := a.Do("CLIENT", "LIST", "TYPE", "pubsub"); err == nil && strings.Contains(list, " sub=2 ") {
				return true
			}
		}
		return false
	})

	if got := untilNotTryAgain(t, func() string { return string(l.node.Admin(ctx, args("raft.transfer", target.id))) }); got != "+OK\r\n" {
		t.Fatalf("RAFT.TRANSFER = %q", got)
	}
	thost, tport, _ := net.SplitHostPort(target.cfg.ClientAddr)
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("no +switch-master message: %v", err)
	}
	if want := "raftset " + lhost + " " + lport + " " + thost + " " + tport; msg.Channel != "+switch-master" || msg.Payload != want {
		t.Errorf("message = %q on %q, want %q", msg.Payload, msg.Channel, want)
	}
	testutil.WaitFor(t, 10*time.Second, "the failover client to follow the new leader", func() bool { return role() == "master" })
	if err := rdb.SAdd(ctx, "s", "after").Err(); err != nil {
		t.Errorf("SADD after the switch: %v", err)
	}
}

// A subscriber that never asked this node for the master (its subscription
// came back after the node restarted) hears of the switch under
// Config.MasterName.
func TestSwitchMasterConfiguredName(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) { cfg.MasterName = "cfgname" })
	l := c.leader()
	c.published()
	target, watcher := c.followers(l)[0], c.followers(l)[1]
	sub := dialMember(t, watcher)
	mustDo(t, sub, "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n", "SUBSCRIBE", "+switch-master")
	if got := untilNotTryAgain(t, func() string { return string(l.node.Admin(context.Background(), args("raft.transfer", target.id))) }); got != "+OK\r\n" {
		t.Fatalf("RAFT.TRANSFER = %q", got)
	}
	lhost, lport, _ := net.SplitHostPort(l.cfg.ClientAddr)
	thost, tport, _ := net.SplitHostPort(target.cfg.ClientAddr)
	payload := "cfgname " + lhost + " " + lport + " " + thost + " " + tport
	want := "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$" + strconv.Itoa(len(payload)) + "\r\n" + payload + "\r\n"
	if got, err := sub.Read(); err != nil || got != want {
		t.Errorf("message = %q, %v; want %q", got, err, want)
	}
}
