package main

import (
	"testing"

	"raftset/internal/testutil"
)

// TestScriptRESP3MatchesRedis runs scripts that use Redis 7's RESP3
// conversions — redis.setresp(3) reading set, map and null replies, and
// returned tables with double, big_number, verbatim_string, map and set
// fields, booleans after setresp(3) — on raftset and redis-server 7.0, from
// a RESP2 and a RESP3 connection, and compares the replies byte for byte
// (maps and sets of one element: Lua's iteration order is not compared).
// Doubles whose 7.2 text differs from 7.0's are in testdata/redis72.
func TestScriptRESP3MatchesRedis(t *testing.T) {
	redis := testutil.StartRedis(t)
	addr, _ := startNode(t, "")
	setup := [][]string{
		{"SADD", "s", "a"}, {"SADD", "s2", "m"}, {"SET", "k1", "ohmytext"}, {"SET", "k2", "mynewtext"},
		{"SET", "str", "x"},
	}
	scripts := []string{
		// Replies read under setresp(3).
		"redis.setresp(3); return redis.call('smembers', 's')",
		"redis.setresp(3); return type(redis.call('smembers', 's')['set'])",
		"redis.setresp(3); return redis.call('smembers', 's')['set']['a']",
		"redis.setresp(3); return redis.call('smembers', 'nokey')",
		"redis.setresp(3); return redis.call('sinter', 's', 's')",
		"redis.setresp(3); return redis.call('sunion', 's', 'nokey')",
		"redis.setresp(3); return redis.call('sdiff', 's', 'nokey')",
		"redis.setresp(3); return type(redis.call('get', 'nokey'))",
		"redis.setresp(3); return redis.call('get', 'nokey') == nil",
		"redis.setresp(3); return redis.call('get', 'nokey')",
		"redis.setresp(3); return {redis.call('get', 'str'), redis.call('get', 'nokey'), 'after'}",
		"redis.setresp(3); return redis.call('ping')",
		"redis.setresp(3); return redis.pcall('incr', 'str')",
		"redis.setresp(3); return redis.call('scard', 's')",
		"redis.setresp(3); return redis.call('srandmember', 's', 1)",
		"redis.setresp(3); local r = redis.call('lcs', 'k1', 'k2', 'idx'); return {r['map']['len'], #r['map']['matches']}",
		"redis.setresp(3); return redis.call('lcs', 'k1', 'k2', 'len')",
		"redis.setresp(3); return redis.call('spop', 's2', 3)",
		"redis.setresp(2); return type(redis.call('get', 'nokey'))",
		"redis.setresp(3); redis.setresp(2); return type(redis.call('smembers', 's')['set'])",
		// Booleans: RESP3's after setresp(3), else 1 and null.
		"redis.setresp(3); return true",
		"redis.setresp(3); return false",
		"redis.setresp(3); return {1, false, true}",
		"return false",
		"return {true, false}",
		// RESP3 tables returned, whatever the script's protocol.
		"return {double=3.5}",
		"return {double=-0.25}",
		"return {double=3}",
		"return {double=1e20}",
		"return {double=0.0001}",
		"return {double=1/0}",
		"return {double=-1/0}",
		"return {double='x'}",
		"return {err='e', double=1}",
		"return {ok='fine', double=1}",
		"return {big_number='123456789012345678901234567890'}",
		"return {big_number=5}",
		"return {verbatim_string={format='txt', string='hello'}}",
		"return {verbatim_string={format='markdown', string='hi'}}",
		"return {verbatim_string={format='txt'}}",
		"return {map={a=1}}",
		"return {map={}}",
		"return {map={[1]={set={x=true}}}}",
		"return {set={x=true}}",
		"return {set={}}",
		"return {set={[7]=true}}",
		"return {1, {map={k='v'}}, {double=0.5}, {set={z=true}}}",
		"redis.setresp(3); return {map={a=true}}",
	}
	for _, proto := range []string{"2", "3"} {
		ours, theirs := dial(t, addr), dial(t, redis.Addr)
		for _, c := range []*testutil.RESPClient{ours, theirs} {
			do(t, c, "HELLO", proto)
			do(t, c, "FLUSHALL")
			for _, cmd := range setup {
				do(t, c, cmd...)
			}
		}
		for _, body := range scripts {
			for _, cmd := range [][]string{{"EVAL", body, "0"}, {"SADD", "s2", "m"}} {
				a, b := do(t, ours, cmd...), do(t, theirs, cmd...)
				if a != b {
					t.Errorf("RESP%s %q:\n raftset %q\n redis   %q", proto, cmd[1], a, b)
				}
			}
		}
		// Inside MULTI: EXEC's reply holds the script's, converted alike.
		for _, cmd := range [][]string{{"MULTI"}, {"EVAL", "return {map={a=1}}", "0"},
			{"EVAL", "redis.setresp(3); return {true, {double=2.5}}", "0"}, {"SMEMBERS", "s"}, {"EXEC"}} {
			if a, b := do(t, ours, cmd...), do(t, theirs, cmd...); a != b {
				t.Errorf("RESP%s %q:\n raftset %q\n redis   %q", proto, cmd, a, b)
			}
		}
	}
}
