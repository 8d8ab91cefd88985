// Package certgen makes the certificates a raftset cluster needs for mutual
// TLS: a private CA and node certificates signed by it (`raftset cert`), so a
// dev or compose cluster can run with TLS without an external tool. Keys are
// ECDSA P-256; node certificates serve both as server and as client
// certificates, since every node is both to its peers.
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA certificate valid for validFor.
func NewCA(commonName string, validFor time.Duration) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl, err := template(commonName, validFor)
	if err != nil {
		return Pair{}, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign CA certificate: %w", err)
	}
	return encode(der, key)
}

// NodeSpec names a node certificate's subject and alternative names.
type NodeSpec struct {
	Name     string // common name, also a DNS name
	IPs      []net.IP
	DNSNames []string
	ValidFor time.Duration
	// ClientOnly makes a client certificate (for tls-auth-clients), not a
	// server one.
	ClientOnly bool
}

// NewNode makes a certificate for spec signed by ca.
func NewNode(ca Pair, spec NodeSpec) (Pair, error) {
	if spec.Name == "" {
		return Pair{}, errors.New("a node certificate needs a name")
	}
	caCert, caKey, err := parse(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("read CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key: %w", err)
	}
	tmpl, err := template(spec.Name, spec.ValidFor)
	if err != nil {
		return Pair{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if !spec.ClientOnly {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = append([]string{spec.Name}, spec.DNSNames...)
		tmpl.IPAddresses = spec.IPs
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Pair{}, fmt.Errorf("sign certificate for %s: %w", spec.Name, err)
	}
	return encode(der, key)
}

func template(cn string, validFor time.Duration) (*x509.Certificate, error) {
	if validFor <= 0 {
		validFor = 365 * 24 * time.Hour
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"raftset"}},
		NotBefore:    now.Add(-time.Hour), // tolerate peers whose clocks lag a little
		NotAfter:     now.Add(validFor),
	}, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	}, nil
}

func parse(p Pair) (*x509.Certificate, any, error) {
	cb, _ := pem.Decode(p.CertPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !cert.IsCA {
		return nil, nil, errors.New("the certificate is not a CA")
	}
	kb, _ := pem.Decode(p.KeyPEM)
	if kb == nil {
		return nil, nil, errors.New("no PEM key")
	}
	var key any
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("parse key: %w", err)
	}
	return cert, key, nil
}
