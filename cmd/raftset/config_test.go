package main

import (
	"net"
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
		{"promote-lag", "1000"}, {"cluster-secret", ""},
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

func TestClusterDirectives(t *testing.T) {
	cfg, err := LoadConfig([]string{"--peers", "n1=10.0.0.1:7000, n2=10.0.0.2:7000", "--advertise-addr", "10.0.0.1:6379",
		"--raft-advertise-addr", "10.0.0.1:7000", "--join", "10.0.0.2:6379"})
	if err != nil {
		t.Fatal(err)
	}
	peers, err := ParsePeers(cfg.Peers)
	if err != nil || len(peers) != 2 || peers[1].ID != "n2" || peers[1].Addr != "10.0.0.2:7000" {
		t.Errorf("peers = %v, %v", peers, err)
	}
	if cfg.AdvertiseAddr != "10.0.0.1:6379" || cfg.RaftAdvertiseAddr != "10.0.0.1:7000" || cfg.Join != "10.0.0.2:6379" {
		t.Errorf("config = %+v", cfg)
	}
	for _, bad := range [][]string{
		{"--peers", "n1"}, {"--peers", "n1=x"}, {"--peers", "n1=a:1,n1=b:2"}, {"--advertise-addr", "nohostport"}, {"--join", "x"},
	} {
		if _, err := LoadConfig(bad); err == nil {
			t.Errorf("LoadConfig(%q) accepted", bad)
		}
	}
	if got := clientAddr(&Config{RaftAddr: "10.1.2.3:7000"}, &net.TCPAddr{IP: net.IPv4zero, Port: 6379}); got != "10.1.2.3:6379" {
		t.Errorf("clientAddr for 0.0.0.0 = %q", got)
	}
}

// The client limits are Redis's directives with Redis's defaults; a config
// file line sets only the output buffer classes it names.
func TestLimitDirectives(t *testing.T) {
	c, err := LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"protected-mode", "yes"}, {"maxclients", "10000"}, {"timeout", "0"}, {"tcp-keepalive", "300"},
		{"proto-max-bulk-len", "536870912"}, {"client-query-buffer-limit", "1073741824"},
		{"client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"},
	} {
		if got, _ := c.Get(tc.name); got != tc.want {
			t.Errorf("default %s = %q, want %q", tc.name, got, tc.want)
		}
	}

	path := filepath.Join(t.TempDir(), "raftset.conf")
	conf := "protected-mode no\nmaxclients 50\ntimeout 30\ntcp-keepalive 0\nproto-max-bulk-len 2mb\n" +
		"client-query-buffer-limit 4mb\nclient-output-buffer-limit pubsub 1mb 512kb 5\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig([]string{path, "--client-output-buffer-limit", "normal 64mb 0 0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ProtectedMode != "no" || c.MaxClients != 50 || c.Timeout != 30 || c.TCPKeepAlive != 0 ||
		c.ProtoMaxBulkLen != 2<<20 || c.ClientQueryBufferLimit != 4<<20 ||
		c.ClientOutputBufferLimit != "normal 67108864 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 5" {
		t.Errorf("config = %+v", c)
	}

	for _, args := range [][]string{
		{"--protected-mode", "maybe"}, {"--maxclients", "0"}, {"--timeout", "-1"}, {"--tcp-keepalive", "x"},
		{"--client-query-buffer-limit", "lots"}, {"--client-output-buffer-limit", "master 1 2 3"},
		{"--client-output-buffer-limit", "pubsub 1 2"},
	} {
		if _, err := LoadConfig(args); err == nil {
			t.Errorf("LoadConfig(%q) accepted it", args)
		}
	}
}
