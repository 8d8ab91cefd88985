package testutil

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"raftset/internal/certgen"
	"raftset/internal/tlsconf"
)

// NodeCertStore writes a certificate for name (valid for 127.0.0.1) signed
// by ca, its key and the CA under dir, and returns the loaded store.
func NodeCertStore(t testing.TB, dir string, ca certgen.Pair, name string) *tlsconf.Store {
	t.Helper()
	node, err := certgen.NewNode(ca, certgen.NodeSpec{Name: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	files := tlsconf.Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, name+"-ca.crt")}
	for f, b := range map[string][]byte{files.Cert: node.CertPEM, files.Key: node.KeyPEM, files.CA: ca.CertPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := tlsconf.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
