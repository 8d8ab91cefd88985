package tlsconf

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"raftset/internal/certgen"
)

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReloadSwapsCertificateAndKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	ca, err := certgen.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := certgen.NewNode(ca, certgen.NodeSpec{Name: "first"})
	second, _ := certgen.NewNode(ca, certgen.NodeSpec{Name: "second"})
	files := Files{Cert: filepath.Join(dir, "n.crt"), Key: filepath.Join(dir, "n.key"), CA: filepath.Join(dir, "ca.crt")}
	write(t, files.Cert, first.CertPEM)
	write(t, files.Key, first.KeyPEM)
	write(t, files.CA, ca.CertPEM)
	st, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	name := func() string {
		cert, _ := st.current()
		return cert.Leaf.Subject.CommonName
	}
	if name() != "first" {
		t.Fatalf("loaded %q", name())
	}
	write(t, files.Cert, second.CertPEM)
	write(t, files.Key, second.KeyPEM)
	if err := st.Reload(); err != nil || name() != "second" {
		t.Fatalf("after reload: %q, %v", name(), err)
	}
	write(t, files.Key, []byte("garbage"))
	if err := st.Reload(); err == nil || name() != "second" {
		t.Fatalf("a broken key file: %v, now serving %q", err, name())
	}
}

func TestParsers(t *testing.T) {
	if lo, hi, err := ParseProtocols("TLSv1.3"); err != nil || lo != tls.VersionTLS13 || hi != tls.VersionTLS13 {
		t.Errorf("TLSv1.3: %x %x %v", lo, hi, err)
	}
	if lo, hi, err := ParseProtocols(""); err != nil || lo != tls.VersionTLS12 || hi != tls.VersionTLS13 {
		t.Errorf("empty: %x %x %v", lo, hi, err)
	}
	if _, _, err := ParseProtocols("TLSv1.0"); err == nil {
		t.Error("TLSv1.0 accepted")
	}
	if a, err := ParseClientAuth("optional"); err != nil || a != ClientAuthOptional {
		t.Errorf("optional: %v %v", a, err)
	}
	if _, err := ParseClientAuth("maybe"); err == nil {
		t.Error("maybe accepted")
	}
	if cs, err := ParseCipherSuites("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:TLS_AES_128_GCM_SHA256"); err != nil || len(cs) != 1 {
		t.Errorf("suites: %v %v", cs, err)
	}
	if _, err := ParseCipherSuites("RC4-MD5"); err == nil {
		t.Error("RC4-MD5 accepted")
	}
}

func TestCipherNames(t *testing.T) {
	cs, err := ParseCipherSuites("ECDHE-RSA-AES128-GCM-SHA256:TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
	if err != nil || len(cs) != 2 || cs[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("OpenSSL and IANA names: %v %v", cs, err)
	}
	if err := ParseTLS13Suites("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384"); err != nil {
		t.Error(err)
	}
	if err := ParseTLS13Suites("ECDHE-RSA-AES128-GCM-SHA256"); err == nil {
		t.Error("a TLS 1.2 suite accepted as tls-ciphersuites")
	}
}

// pki writes a CA, a server certificate and a client certificate into dir.
func pki(t *testing.T, dir, prefix string) (server, client Files) {
	t.Helper()
	ca, err := certgen.NewCA(prefix+"-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := certgen.NewNode(ca, certgen.NodeSpec{Name: prefix + "-server"})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := certgen.NewNode(ca, certgen.NodeSpec{Name: prefix + "-client", ClientOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, prefix+"-"+name) }
	for name, b := range map[string][]byte{"ca.crt": ca.CertPEM, "s.crt": srv.CertPEM, "s.key": srv.KeyPEM,
		"c.crt": cli.CertPEM, "c.key": cli.KeyPEM} {
		write(t, p(name), b)
	}
	return Files{Cert: p("s.crt"), Key: p("s.key"), CA: p("ca.crt")}, Files{Cert: p("c.crt"), Key: p("c.key"), CA: p("ca.crt")}
}

// handshake runs one TLS handshake over loopback TCP (a synchronous pipe
// deadlocks when both sides send an alert) and returns the client's error,
// or the server's when the client saw none.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srvErr := make(chan error, 1)
	go func() {
		c := tls.Server(a, server)
		err := c.Handshake()
		if err == nil {
			// TLS 1.3 clients finish before the server has checked their
			// certificate: a read makes the server's verdict reach them.
			_, err = c.Write([]byte("x"))
		}
		srvErr <- err
		_ = a.Close()
	}()
	c := tls.Client(b, client)
	err = c.Handshake()
	if err == nil {
		var buf [1]byte
		_, err = c.Read(buf[:])
	}
	if serr := <-srvErr; err == nil {
		err = serr
	}
	return err
}

func TestClientServerAuthModes(t *testing.T) {
	dir := t.TempDir()
	srvFiles, cliFiles := pki(t, dir, "a")
	_, otherCli := pki(t, dir, "b")
	st, err := Load(srvFiles)
	if err != nil {
		t.Fatal(err)
	}
	withCert, err := ClientConfig(cliFiles, false)
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := ClientConfig(Files{CA: cliFiles.CA}, false)
	if err != nil {
		t.Fatal(err)
	}
	strangerCert, err := ClientConfig(Files{Cert: otherCli.Cert, Key: otherCli.Key, CA: cliFiles.CA}, false)
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := ClientConfig(Files{CA: otherCli.CA}, false)
	if err != nil {
		t.Fatal(err)
	}
	auth := ClientAuthYes
	srv := st.ClientServerFunc(func() (ClientAuth, Options) { return auth, Options{} })
	for _, tc := range []struct {
		auth   ClientAuth
		client *tls.Config
		ok     bool
	}{
		{ClientAuthYes, withCert, true},
		{ClientAuthYes, noCert, false},
		{ClientAuthYes, strangerCert, false},
		{ClientAuthOptional, noCert, true},
		{ClientAuthOptional, withCert, true},
		{ClientAuthOptional, strangerCert, false},
		{ClientAuthNo, noCert, true},
		{ClientAuthNo, wrongCA, false}, // the client does not trust the server
	} {
		auth = tc.auth
		if err := handshake(t, srv, tc.client); (err == nil) != tc.ok {
			t.Errorf("auth %d: handshake error %v, want success %v", tc.auth, err, tc.ok)
		}
	}
	if err := st.CheckClient(ClientAuthYes); err != nil {
		t.Error(err)
	}
	noCA, err := Load(Files{Cert: srvFiles.Cert, Key: srvFiles.Key})
	if err != nil {
		t.Fatal(err)
	}
	if noCA.CheckClient(ClientAuthOptional) == nil || noCA.CheckClient(ClientAuthNo) != nil {
		t.Error("CheckClient: verifying clients without a CA must be refused, and only then")
	}
}

// Between nodes, only node certificates of the cluster's CA are peers: a
// client certificate the same CA signed (for tls-auth-clients) is refused,
// and so is a node certificate of another CA.
func TestPeerServerAdmitsNodeCertificatesOnly(t *testing.T) {
	dir := t.TempDir()
	srvFiles, cliFiles := pki(t, dir, "a")
	otherNode, _ := pki(t, dir, "b")
	st, err := Load(srvFiles)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := st.PeerServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	peer := func(files Files) *tls.Config {
		ps, err := Load(Files{Cert: files.Cert, Key: files.Key, CA: srvFiles.CA})
		if err != nil {
			t.Fatal(err)
		}
		c, err := ps.PeerClient(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := handshake(t, srv, peer(srvFiles)); err != nil {
		t.Errorf("a node certificate of the CA: %v", err)
	}
	if err := handshake(t, srv, peer(cliFiles)); err == nil {
		t.Error("a client certificate of the same CA was taken for a peer")
	}
	if err := handshake(t, srv, peer(otherNode)); err == nil {
		t.Error("a node certificate of another CA was taken for a peer")
	}
	pinned, err := st.PeerServer([]string{"someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, pinned, peer(srvFiles)); err == nil {
		t.Error("a peer outside the pinned names was admitted")
	}
}
