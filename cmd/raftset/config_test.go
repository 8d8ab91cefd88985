package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"bind", "127.0.0.1"}, {"port", "6379"}, {"raft-addr", "127.0.0.1:16379"},
		{"dir", "./raftset-data"}, {"set-max-intset-entries", "512"}, {"set-max-listpack-entries", "128"},
		{"set-max-listpack-value", "64"}, {"loglevel", "info"}, {"log-format", "text"},
		{"requirepass", ""}, {"node-id", ""}, {"snapshot-interval", "2m0s"},
	} {
		if got, _ := c.Get(tc.name); got != tc.want {
			t.Errorf("default %s = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFileThenFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raftset.conf")
	conf := "# comment\nport 7000\nrequirepass \"s3cret pass\"\nsnapshot-interval 30\nlog-format JSON\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig([]string{path, "--port", "7001", "--set-max-listpack-entries=32"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 7001 || c.RequirePass != "s3cret pass" || c.SnapshotInterval != 30*time.Second ||
		c.LogFormat != "json" || c.MaxListpackEntries != 32 {
		t.Errorf("config = %+v", c)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "x"}, "port"},
		{[]string{"--nope", "1"}, "unknown directive"},
		{[]string{"--port"}, "needs a value"},
		{[]string{"--loglevel", "loud"}, "must be one of"},
		{[]string{"/does/not/exist.conf"}, "read config"},
		{[]string{"--port", "1", "stray"}, "expected --name value"},
	} {
		_, err := LoadConfig(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadConfig(%q) error = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}
