package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCertWritesACAAndNodeCertificatesItSigned(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	for _, args := range [][]string{
		{"cert", "ca", "--dir", dir},
		{"cert", "node", "n1", "--dir", dir, "--ip", "127.0.0.1,10.0.0.5", "--dns", "n1.local"},
		{"cert", "client", "app", "--dir", dir},
	} {
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	read := func(name string) *x509.Certificate {
		b, err := os.ReadFile(filepath.Join(dir, name+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	n1 := read("n1")
	if _, err := n1.Verify(x509.VerifyOptions{Roots: pool, DNSName: "n1.local", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("node certificate: %v", err)
	}
	if _, err := n1.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("node certificate as a client: %v", err)
	}
	if len(n1.IPAddresses) != 2 || n1.IPAddresses[1].String() != "10.0.0.5" {
		t.Fatalf("IPs %v", n1.IPAddresses)
	}
	if _, err := read("app").Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "n1.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", st.Mode())
	}
	// A second CA would orphan every certificate: refused.
	errb.Reset()
	if code := run([]string{"cert", "ca", "--dir", dir}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "exists") {
		t.Fatalf("second CA: exit %d, %s", code, errb.String())
	}
	if code := run([]string{"cert", "node", "n2", "--dir", t.TempDir()}, &out, &errb); code == 0 {
		t.Fatal("a node certificate without a CA was made")
	}
}

// cert init is safe to run at every start: it makes what is missing, keeps
// what the CA signed, and with --ca-dir the CA key stays out of --dir.
func TestCertInitIsIdempotent(t *testing.T) {
	dir, caDir := t.TempDir(), t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"cert", "init", "--dir", dir, "--ca-dir", caDir, "n1", "n2"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	first, _ := os.ReadFile(filepath.Join(dir, "n1.crt"))
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); err == nil {
		t.Error("the CA key was written beside the node certificates")
	}
	for _, f := range []string{"ca.crt", "n1.crt", "n1.key", "n2.crt", "n2.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	out.Reset()
	if code := run(append(args, "n3"), &out, &errb); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errb.String())
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "n1.crt")); !bytes.Equal(first, again) {
		t.Error("a second run replaced a valid certificate")
	}
	if !strings.Contains(out.String(), "kept") || !strings.Contains(out.String(), "n3.crt") {
		t.Errorf("second run said %q", out.String())
	}
	// A new CA (its volume was dropped): the old certificates are reissued.
	if err := os.Remove(filepath.Join(caDir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("run with a new CA: exit %d: %s", code, errb.String())
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "n1.crt")); bytes.Equal(first, again) {
		t.Error("a certificate of the old CA was kept under a new CA")
	}
	if code := run([]string{"cert", "init", "--dir", dir}, &out, &errb); code != 2 {
		t.Errorf("init without names: exit %d", code)
	}
}
