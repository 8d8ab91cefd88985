package acl

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// redisTable builds the test's command table from redis-server's own
// COMMAND reply, so that +@category means here what it means there.
func redisTable(t *testing.T, c *respwire.Client) *fakeCommands {
	t.Helper()
	reply, err := c.DoParsed("COMMAND")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCommands{}
	var add func(e respwire.Reply)
	add = func(e respwire.Reply) {
		noAuth := false
		for _, fl := range e.Elems[2].Elems {
			noAuth = noAuth || fl.Str == "no_auth"
		}
		var cats []string
		for _, c := range e.Elems[6].Elems {
			cats = append(cats, c.Str)
		}
		f.add(e.Elems[0].Str, noAuth, cats...)
		for _, s := range e.Elems[9].Elems {
			add(s)
		}
	}
	for _, e := range reply.Elems {
		add(e)
	}
	return f
}

// to72 rewrites Redis 7.0's -NOPERM and ACL DRYRUN texts into 7.2's, the
// wording the package implements; every other reply is left as it is.
var (
	noperm70Cmd  = regexp.MustCompile(`^-NOPERM this user has no permissions to run the '([^']*)' command\r\n$`)
	dryrun70     = regexp.MustCompile(`^\$\d+\r\nThis user (has no permissions to (?:run|access) the '[^']*' (?:command|key|channel))\r\n$`)
	noperm70Key  = "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"
	noperm70Chan = "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n"
)

func to72(reply, user string) string {
	switch {
	case reply == noperm70Key:
		return "-NOPERM No permissions to access a key\r\n"
	case reply == noperm70Chan:
		return "-NOPERM No permissions to access a channel\r\n"
	}
	if m := noperm70Cmd.FindStringSubmatch(reply); m != nil {
		return "-NOPERM User " + user + " has no permissions to run the '" + m[1] + "' command\r\n"
	}
	if m := dryrun70.FindStringSubmatch(reply); m != nil {
		s := "User " + user + " " + m[1]
		return string(command.AppendBulkString(nil, s))
	}
	return reply
}

type step struct {
	as   string   // run a command as this user (AUTH'ed with "pw"); "" runs ACL and AUTH as default
	args []string // the command line
	// want72 is the expected reply where Redis 7.0 differs from 7.2 in
	// ways to72 cannot rewrite (command rules rebuilt from a bitmap,
	// selectors); "" compares with redis-server's reply.
	want72 string
	sorted bool // compare an array reply's elements as a set (hash-table order)
	any    bool // a random reply: compare its shape only
}

func s(line string) step { return step{args: strings.Fields(line)} }

func (st step) expect(want string) step { st.want72 = want; return st }

func bulk(s string) string { return string(command.AppendBulkString(nil, s)) }

func getuser(flags []string, pass []string, cmds, keys, chans string) string {
	out := "*12\r\n" + bulk("flags") + "*" + itoa(len(flags)) + "\r\n"
	for _, f := range flags {
		out += bulk(f)
	}
	out += bulk("passwords") + "*" + itoa(len(pass)) + "\r\n"
	for _, p := range pass {
		out += bulk(p)
	}
	return out + bulk("commands") + bulk(cmds) + bulk("keys") + bulk(keys) + bulk("channels") + bulk(chans) + bulk("selectors") + "*0\r\n"
}

func itoa(n int) string {
	return string(command.AppendInt(nil, int64(n))[1 : len(command.AppendInt(nil, int64(n)))-2])
}

func TestAgainstRedis(t *testing.T) {
	srv := testutil.StartRedis(t)
	rc, err := respwire.Dial(srv.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	cmds := redisTable(t, rc)
	names := map[string]bool{}
	for _, n := range cmds.names {
		names[n] = true
	}
	reg := mustNew(t, cmds)
	now := time.Now()
	log := NewLog(0, func() time.Time { return now })
	sess := Session{User: "default", Log: log, Resolve: testResolver(names)}
	pw := hashPassword([]byte("pw"))

	steps := []step{
		s("ACL LIST"), s("ACL USERS"), s("ACL WHOAMI"), s("ACL GETUSER default"), s("ACL GETUSER nosuch"),
		// passwords
		s("ACL SETUSER u1 on >pw >pw2"), s("ACL GETUSER u1"), s("ACL SETUSER u1 <pw2"), s("ACL SETUSER u1 <pw2"),
		s("ACL SETUSER u1 #" + pw), s("ACL SETUSER u1 !" + pw), s("ACL SETUSER u1 !" + pw),
		s("ACL SETUSER u1 #abc"), s("ACL SETUSER u1 !ABC"), s("ACL SETUSER u1 #" + strings.ToUpper(pw)),
		s("ACL SETUSER u1 nopass"), s("ACL GETUSER u1"), s("ACL SETUSER u1 resetpass >pw"), s("ACL LIST"),
		s("ACL SETUSER u1 off"), s("ACL GETUSER u1"), s("ACL SETUSER u1 ON"),
		// keys and channels
		s("ACL SETUSER u2 ~a* %R~b* %W~c* %RW~d* %WR~e* ~a* %R~c*"), s("ACL GETUSER u2"), s("ACL LIST"),
		s("ACL SETUSER u2 %RR~z"), s("ACL SETUSER u2 %X~z"), s("ACL SETUSER u2 %~z"), s("ACL SETUSER u3 %R"), s("ACL GETUSER u3"),
		s("ACL SETUSER u2 allkeys"), s("ACL SETUSER u2 ~x"), s("ACL SETUSER u2 %R~x"), s("ACL SETUSER u2 resetkeys ~y"), s("ACL GETUSER u2"),
		s("ACL SETUSER u2 &x &y &x"), s("ACL GETUSER u2"), s("ACL SETUSER u2 allchannels"), s("ACL SETUSER u2 &z"),
		s("ACL SETUSER u2 resetchannels &q"), s("ACL SETUSER u2 &*"), s("ACL GETUSER u2"), s("ACL SETUSER u2 resetchannels"), s("ACL LIST"),
		// commands
		s("ACL SETUSER c1 +@all -keys"), s("ACL GETUSER c1"),
		s("ACL SETUSER c2 -@all +@set"), s("ACL GETUSER c2"),
		s("ACL SETUSER c3 allcommands -get"), s("ACL GETUSER c3"),
		s("ACL SETUSER c4 +config|get"), s("ACL GETUSER c4"),
		s("ACL SETUSER c5 +config -config|set"), s("ACL GETUSER c5"),
		s("ACL SETUSER c6 +select|0"), s("ACL GETUSER c6"),
		s("ACL SETUSER c6 -select").expect("+OK\r\n"),
		s("ACL GETUSER c6").expect(getuser([]string{"off"}, nil, "-@all -select", "", "")),
		s("ACL SETUSER c7 +@all -@dangerous"),
		s("ACL GETUSER c7").expect(getuser([]string{"off"}, nil, "+@all -@dangerous", "", "")),
		s("ACL SETUSER c8 nocommands +get +set -get"),
		s("ACL GETUSER c8").expect(getuser([]string{"off"}, nil, "-@all +set -get", "", "")),
		s("ACL SETUSER c9 +@read +@keyspace -@read +@read"),
		s("ACL GETUSER c9").expect(getuser([]string{"off"}, nil, "-@all +@keyspace +@read", "", "")),
		s("ACL SETUSER c10 +@all -@all +get"), s("ACL GETUSER c10"),
		s("ACL SETUSER c11 +CONFIG|GET"), s("ACL GETUSER c11"),
		s("ACL SETUSER c12 +config|get|x"), s("ACL SETUSER c12 +config|"), s("ACL SETUSER c12 +nosuch"),
		s("ACL SETUSER c12 -nosuch"), s("ACL SETUSER c12 +@nosuch"), s("ACL SETUSER c12 -@nosuch"), s("ACL SETUSER c12 -select|0"),
		s("ACL SETUSER c12 +config|nosuch"), s("ACL SETUSER c12 foo"), s("ACL SETUSER c12 +"), s("ACL SETUSER c12 +@"),
		s("ACL GETUSER c12"),
		// 7.0 describes these from its bitmap: out of the ACL LIST comparisons.
		s("ACL DELUSER c6 c8 c9"),
		// flags, reset, atomicity
		s("ACL SETUSER f1 on skip-sanitize-payload >pw ~k &c +get"), s("ACL LIST"), s("ACL SETUSER f1 sanitize-payload"), s("ACL GETUSER f1"),
		s("ACL SETUSER f1 reset"), s("ACL GETUSER f1"), s("ACL SETUSER f1 on ~x +get bogus"), s("ACL GETUSER f1"),
		s("ACL SETUSER f2 bogus"), s("ACL GETUSER f2"),
		{args: []string{"ACL", "SETUSER", "a b"}},
		{args: []string{"ACL", "SETUSER", "f3", ""}}, s("ACL GETUSER f3"),
		s("ACL SETUSER f4 (~x +get)").expect("-ERR Error in ACL SETUSER modifier '(~x': Selectors are not supported\r\n"),
		s("ACL DELUSER f4").expect(":0\r\n"),
		// deletion
		s("ACL DELUSER default"), s("ACL DELUSER nosuch c1 c2"), s("ACL DELUSER c3 default"), s("ACL USERS"),
		// errors of the ACL command itself
		s("ACL"), s("ACL foo"), s("ACL GETUSER"), s("ACL WHOAMI x"), s("ACL CAT a b"), s("ACL DELUSER"),
		s("ACL LOAD"), s("ACL SAVE"), s("ACL HELP"), s("ACL CAT"), {args: strings.Fields("ACL CAT set"), sorted: true},
		{args: strings.Fields("ACL CAT Admin"), sorted: true}, s("ACL CAT nosuch"),
		s("ACL GENPASS 0"), s("ACL GENPASS 4097"), s("ACL GENPASS x"), {args: strings.Fields("ACL GENPASS"), any: true},
		{args: strings.Fields("ACL GENPASS 5"), any: true}, s("ACL LOG x"), s("ACL LOG -1"), s("ACL LOG 01"),
		// AUTH
		s("AUTH x"), s("AUTH nosuch pw"), s("AUTH a b c"),
		s("ACL SETUSER alice on >pw ~k* %R~r* %W~w* &ch* +@read -get +config|get +select|0 +sadd +publish"),
		s("AUTH alice pw"), s("AUTH alice nope"), s("ACL SETUSER alice off"), s("AUTH alice pw"), s("ACL SETUSER alice on"),
		// checks, as alice
		{as: "alice", args: strings.Fields("GET k1")},
		{as: "alice", args: strings.Fields("SMEMBERS k1")},
		{as: "alice", args: strings.Fields("SMEMBERS zz")},
		{as: "alice", args: strings.Fields("SMEMBERS r1")},
		{as: "alice", args: strings.Fields("SMEMBERS w1")},
		{as: "alice", args: strings.Fields("SADD w1 x")},
		{as: "alice", args: strings.Fields("SADD r1 x")},
		{as: "alice", args: strings.Fields("EXISTS w1")},
		{as: "alice", args: strings.Fields("EXISTS zz")},
		{as: "alice", args: strings.Fields("PUBLISH ch1 m")},
		{as: "alice", args: strings.Fields("PUBLISH d m")},
		{as: "alice", args: strings.Fields("CONFIG GET maxmemory")},
		{as: "alice", args: strings.Fields("CONFIG SET maxmemory 0")},
		{as: "alice", args: strings.Fields("SELECT 0")},
		{as: "alice", args: strings.Fields("SELECT 1")},
		{as: "alice", args: strings.Fields("PING")},
		{as: "alice", args: strings.Fields("SMEMBERS zz")},
		s("ACL DRYRUN alice get k1"), s("ACL DRYRUN alice smembers zz"), s("ACL DRYRUN alice smembers k1"),
		s("ACL DRYRUN alice publish d m"), s("ACL DRYRUN alice config set maxmemory 0"), s("ACL DRYRUN alice select 0"),
		s("ACL DRYRUN nosuch get k"), s("ACL DRYRUN alice nosuchcmd"),
		// requirepass is the default user's password
		s("CONFIG SET requirepass pw"), s("ACL GETUSER default"), s("AUTH pw"), s("AUTH default nope"),
		{args: []string{"CONFIG", "SET", "requirepass", ""}},
		s("ACL GETUSER default"),
	}

	userConns := map[string]*respwire.Client{}
	defer func() {
		for _, c := range userConns {
			c.Close()
		}
	}()
	for i, st := range steps {
		var redisReply, ours string
		if st.as != "" {
			c := userConns[st.as]
			if c == nil {
				if c, err = respwire.Dial(srv.Addr, 5*time.Second); err != nil {
					t.Fatal(err)
				}
				if rep, err := c.Do("AUTH", st.as, "pw"); err != nil || rep != "+OK\r\n" {
					t.Fatalf("AUTH %s: %q %v", st.as, rep, err)
				}
				userConns[st.as] = c
			}
			if redisReply, err = c.Do(st.args...); err != nil {
				t.Fatal(err)
			}
			cmd, sub, keys, _ := sess.Resolve(words(strings.Join(st.args, " ")))
			if err := reg.Check(st.as, cmd, sub, keys); err != nil {
				ours = string(AppendError(nil, err))
				log.Add(err.(*DeniedError).Event("toplevel", ""))
			} else {
				// Allowed: Redis ran it, so its reply is no -NOPERM.
				ours = redisReply
				if strings.HasPrefix(redisReply, "-NOPERM") {
					ours = "(allowed)"
				}
			}
		} else {
			if redisReply, err = rc.Do(st.args...); err != nil {
				t.Fatal(err)
			}
			args := make([][]byte, len(st.args))
			for j, a := range st.args {
				args[j] = []byte(a)
			}
			switch strings.ToUpper(st.args[0]) {
			case "ACL":
				ours = string(reg.Exec(nil, args, sess))
			case "AUTH":
				if _, err := reg.Auth(args); err != nil {
					ours = string(AppendError(nil, err))
					if err == ErrWrongPass {
						user := "default"
						if len(args) == 3 {
							user = st.args[1]
						}
						log.Add(AuthEvent(user, st.args[0], "toplevel", ""))
					}
				} else {
					ours = "+OK\r\n"
				}
				// Redis's connection is now that user; go back to default.
				if _, err := rc.Do("AUTH", "default", "pw"); err != nil {
					t.Fatal(err)
				}
			case "CONFIG":
				pass := ""
				if len(st.args) > 3 {
					pass = st.args[3]
				}
				reg.SetRequirePass(pass)
				ours = "+OK\r\n"
			}
		}
		want := to72(redisReply, st.as+strings.TrimPrefix(dryrunUser(st.args), st.as))
		if st.want72 != "" {
			want = st.want72
		}
		switch {
		case st.any:
			if (redisReply[0] == '$') != (ours[0] == '$') || len(ours) != len(redisReply) {
				t.Errorf("step %d %q: ours %q, redis %q: different shapes", i, st.args, ours, redisReply)
			}
		case st.sorted:
			if g, w := sortedElems(t, ours), sortedElems(t, want); strings.Join(g, ",") != strings.Join(w, ",") {
				t.Errorf("step %d %q: ours %v; redis %v", i, st.args, g, w)
			}
		case ours != want:
			t.Errorf("step %d %q:\nours  %q\nredis %q", i, st.args, ours, want)
		}
	}
	compareLogs(t, rc, sess.Log)
	for _, line := range []string{"ACL LOG RESET", "ACL LOG"} {
		args := strings.Fields(line)
		want, err := rc.Do(args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(reg.Exec(nil, words(line), sess)); got != want {
			t.Errorf("%s: ours %q; redis %q", line, got, want)
		}
	}
}

// dryrunUser is the user an ACL DRYRUN line names, for to72.
func dryrunUser(args []string) string {
	if len(args) > 2 && strings.EqualFold(args[0], "ACL") && strings.EqualFold(args[1], "DRYRUN") {
		return args[2]
	}
	return ""
}

func sortedElems(t *testing.T, raw string) []string {
	r, err := respwire.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	return r.Sorted()
}

// compareLogs checks that the package's ACL log, fed the same denials,
// says what Redis's says in the fields they share (7.0 has no entry ids
// and timestamps; ages and client info differ by nature).
func compareLogs(t *testing.T, rc *respwire.Client, log *Log) {
	t.Helper()
	theirs, err := rc.DoParsed("ACL", "LOG", "100")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := respwire.Parse(log.AppendReply(nil, 100))
	if err != nil {
		t.Fatal(err)
	}
	if len(ours.Elems) != len(theirs.Elems) || len(ours.Elems) == 0 {
		t.Fatalf("ACL LOG: ours has %d entries, redis %d", len(ours.Elems), len(theirs.Elems))
	}
	for i := range ours.Elems {
		o, err1 := ours.Elems[i].Map()
		r, err2 := theirs.Elems[i].Map()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		for _, f := range []string{"count", "reason", "context", "object", "username"} {
			if o[f] != r[f] {
				t.Errorf("ACL LOG entry %d %s: ours %q; redis %q", i, f, o[f], r[f])
			}
		}
	}
}
