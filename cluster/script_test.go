package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// unlockScript is redsync's (and most Redlock clients') release: delete the
// lock only if it still holds this owner's token.
const unlockScript = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`

// TestScriptsThroughFollower: go-redis's Script helper (EVALSHA, then EVAL
// on NOSCRIPT) and a redsync-style lock/unlock cycle work against a 3-node
// cluster through a follower, and every node ends with the same digest and
// the same script cache.
func TestScriptsThroughFollower(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	c.published()
	f := c.followers(l)[0]
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: f.cfg.ClientAddr, MaxRetries: -1})
	defer rdb.Close()

	// go-redis's Script: the first Run gets NOSCRIPT and falls back to EVAL,
	// which caches the body on every node; the second finds it by SHA.
	incr := goredis.NewScript(`return redis.call("incrby", KEYS[1], ARGV[1]) + 0`)
	for i, want := range []int64{5, 10} {
		got, err := incr.Run(ctx, rdb, []string{"counter"}, 5).Int64()
		if err != nil || got != want {
			t.Fatalf("Script.Run #%d = %d, %v; want %d", i, got, err, want)
		}
	}
	exists, err := incr.Exists(ctx, rdb).Result()
	if err != nil || len(exists) != 1 || !exists[0] {
		t.Fatalf("SCRIPT EXISTS after EVAL = %v, %v", exists, err)
	}

	// A redsync-style cycle: SET NX PX with a token, the unlock script with
	// a wrong token keeps the lock, with the right one releases it.
	unlock := goredis.NewScript(unlockScript)
	for round := range 3 {
		token := fmt.Sprintf("token-%d", round)
		ok, err := rdb.SetNX(ctx, "lock", token, 0).Result()
		if err != nil || !ok {
			t.Fatalf("round %d: lock = %v, %v", round, ok, err)
		}
		if ok, _ := rdb.SetNX(ctx, "lock", "other", 0).Result(); ok {
			t.Fatalf("round %d: a second owner took a held lock", round)
		}
		if n, err := unlock.Run(ctx, rdb, []string{"lock"}, "not-mine").Int64(); err != nil || n != 0 {
			t.Fatalf("round %d: unlock with a wrong token = %d, %v", round, n, err)
		}
		if n, err := unlock.Run(ctx, rdb, []string{"lock"}, token).Int64(); err != nil || n != 1 {
			t.Fatalf("round %d: unlock = %d, %v", round, n, err)
		}
		if err := rdb.Get(ctx, "lock").Err(); !errors.Is(err, goredis.Nil) {
			t.Fatalf("round %d: lock still held after unlock: %v", round, err)
		}
	}

	// A read-only script through the follower, without a log entry.
	before := l.fsm.AppliedIndex()
	got, err := rdb.EvalRO(ctx, `return redis.call("get", KEYS[1])`, []string{"counter"}).Text()
	if err != nil || got != "10" {
		t.Fatalf("EVAL_RO = %q, %v", got, err)
	}
	got, err = rdb.Eval(ctx, "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", []string{"counter"}).Text()
	if err != nil || got != "10" {
		t.Fatalf("EVAL of a no-writes script = %q, %v", got, err)
	}
	if after := l.fsm.AppliedIndex(); after != before {
		t.Fatalf("read-only scripts wrote log entries: applied %d → %d", before, after)
	}

	// An error inside a script reaches the client with Redis's text.
	bad := goredis.NewScript(`return redis.call("nosuch")`)
	err = rdb.Eval(ctx, `return redis.call("nosuch")`, nil).Err()
	if err == nil || err.Error() != "ERR Unknown Redis command called from script script: "+bad.Hash()+", on @user_script:1." {
		t.Fatalf("error reply = %v", err)
	}

	c.converged(l)
	for _, m := range c.members {
		r := goredis.NewClient(&goredis.Options{Addr: m.cfg.ClientAddr})
		ex, err := r.ScriptExists(ctx, incr.Hash(), unlock.Hash()).Result()
		r.Close()
		if err != nil || len(ex) != 2 || !ex[0] || !ex[1] {
			t.Fatalf("%s: SCRIPT EXISTS = %v, %v", m.id, ex, err)
		}
	}
}
