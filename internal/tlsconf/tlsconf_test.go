package tlsconf

import (
	"crypto/tls"
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
