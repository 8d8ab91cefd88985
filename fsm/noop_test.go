package fsm

import (
	"testing"
)

func TestNoopReply(t *testing.T) {
	f := New(Config{})
	doCmd(t, f, 1000, "sadd", "s", "a")
	doCmd(t, f, 1000, "set", "str", "v")
	doCmd(t, f, 1000, "sadd", "ttl", "a")
	doCmd(t, f, 1000, "pexpire", "ttl", "500") // deadline 1500
	cases := []struct {
		args []string
		now  int64
		want string // "" when not a no-op
	}{
		{[]string{"spop", "missing"}, 1000, "$-1\r\n"},
		{[]string{"SPOP", "missing"}, 1000, "$-1\r\n"},
		{[]string{"srem", "missing", "a", "b"}, 1000, ":0\r\n"},
		{[]string{"spop", "s"}, 1000, ""},
		{[]string{"srem", "s", "zz"}, 1000, ""}, // exists: the reply needs the set
		{[]string{"spop", "str"}, 1000, ""},     // WRONGTYPE is Apply's to say
		{[]string{"spop", "missing", "2"}, 1000, ""},
		{[]string{"spop", "missing", "-1"}, 1000, ""}, // the count's error comes first
		{[]string{"srem", "missing"}, 1000, ""},       // arity is checked before
		{[]string{"sadd", "missing", "a"}, 1000, ""},
		{[]string{"del", "missing"}, 1000, ""},
		{[]string{"spop", "ttl"}, 1499, ""},
		{[]string{"spop", "ttl"}, 1500, "$-1\r\n"}, // expired: absent, as reads see it
	}
	for _, c := range cases {
		args := make([][]byte, len(c.args))
		for i, a := range c.args {
			args[i] = []byte(a)
		}
		got, ok := f.NoopReply(args, c.now)
		if c.want == "" {
			if ok {
				t.Errorf("%v at %d: answered %q, want a write", c.args, c.now, got)
			}
			continue
		}
		if !ok || string(got) != c.want {
			t.Errorf("%v at %d = %q, %v; want %q", c.args, c.now, got, ok, c.want)
			continue
		}
		// The claim: applying it answers the same and changes nothing.
		before := doCmd(t, f, c.now, "debug", "digest")
		if applied := doCmd(t, f, c.now, c.args...); applied != c.want {
			t.Errorf("%v applied = %q, NoopReply said %q", c.args, applied, c.want)
		}
		// (Applied, SPOP of an expired key also deletes it, which the
		// leader's expiry does through the log anyway: a state that differs
		// in what no command can see.)
		if after := doCmd(t, f, c.now, "debug", "digest"); after != before && c.args[1] != "ttl" {
			t.Errorf("%v changed the state", c.args)
		}
	}
}
