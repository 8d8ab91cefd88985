package cluster

import (
	"strings"
	"testing"
)

// With a cluster secret and a password, nodes still forward writes and
// answer WAIT's queries, while a client that knows only the password gets
// internal commands refused as unknown.
func TestNodesAuthenticateToEachOther(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) {
		cfg.ClusterSecret = "cluster-k3y"
		cfg.Password = "pw"
	})
	l := c.leader()
	c.published()
	f := c.followers(l)[0]
	cl := dialMember(t, f)
	mustDo(t, cl, "+OK\r\n", "AUTH", "pw")
	mustDo(t, cl, ":1\r\n", "SADD", "s", "via-follower")
	mustDo(t, cl, ":2\r\n", "WAIT", "2", "0")
	mustDo(t, cl, "-ERR unknown command 'raftset.forward', with args beginning with: 'x' \r\n", "raftset.forward", "x")
	mustDo(t, cl, "-ERR unknown command 'raftset.promote', with args beginning with: 'n9' '0' \r\n", "raftset.promote", "n9", "0")
	pc := &peerConn{Client: cl}
	if err := pc.handshake(t.Context(), peerCreds{secret: []byte("pw")}); err == nil || !strings.Contains(err.Error(), "does not know the cluster secret") {
		t.Errorf("RAFTSET.AUTH with the password as the secret: %v, want the node's proof refused", err)
	}
	mustDo(t, cl, "-ERR unknown command 'raftset.node', with args beginning with: 'n9' 'x:1' \r\n", "raftset.node", "n9", "x:1")
	mustDo(t, cl, "-ERR wrong number of arguments for 'raftset.auth' command\r\n", "raftset.auth", "cluster-k3y")
	if err := pc.handshake(t.Context(), peerCreds{secret: []byte("cluster-k3y")}); err != nil {
		t.Fatalf("RAFTSET.AUTH with the cluster secret: %v", err)
	}
	// Now a node as far as the front end knows.
	if got, err := cl.Do("raftset.applied"); err != nil || len(got) < 4 || got[0] != ':' || got == ":0\r\n" {
		t.Errorf("raftset.applied after RAFTSET.AUTH = %q, %v; want this node's applied index", got, err)
	}
}
