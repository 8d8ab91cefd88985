// Package challenge is the proof of a shared secret that nodes exchange
// before they trust each other: each side sends a fresh nonce and proves
// knowledge of the secret with an HMAC over both nonces and its role, so the
// secret never crosses the wire and a recorded exchange cannot be replayed.
// internal/peerauth runs it on the Raft port (its own framing); the front
// end runs it on the client port as RAFTSET.AUTH (RESP framing). It is pure
// computation, so that both may use it.
package challenge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

const (
	// NonceSize is the length of each side's nonce.
	NonceSize = 32
	// MACSize is the length of a proof.
	MACSize = sha256.Size

	// PurposeRaft: the stream carries hashicorp/raft's RPCs.
	PurposeRaft byte = 1
	// PurposeInternal: a client-port connection that will send internal
	// commands (RAFTSET.AUTH).
	PurposeInternal byte = 2

	labelServer = "server"
	labelClient = "client"
)

// ErrDenied is the error of a proof that does not verify.
var ErrDenied = errors.New("peer authentication failed")

// Nonce returns NonceSize fresh random bytes.
func Nonce() ([]byte, error) {
	b := make([]byte, NonceSize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return b, nil
}

// The exchange, with K the shared secret, nc the client's nonce and ns the
// server's:
//
//	server proof: HMAC(K, "server" | purpose | nc | ns)
//	client proof: HMAC(K, "client" | purpose | ns | nc)
//
// The server proves itself first, so a client never sends its proof to an
// impostor; the labels keep a server's proof from being reflected as a
// client's, and purpose keeps a proof made for one use from serving another.

// ServerMAC is the server's proof.
func ServerMAC(secret []byte, purpose byte, nc, ns []byte) []byte {
	return mac(secret, labelServer, purpose, nc, ns)
}

// ClientMAC is the client's proof.
func ClientMAC(secret []byte, purpose byte, nc, ns []byte) []byte {
	return mac(secret, labelClient, purpose, ns, nc)
}

func mac(secret []byte, label string, purpose byte, first, second []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	h.Write([]byte{purpose})
	h.Write(first)
	h.Write(second)
	return h.Sum(nil)
}

// Answer is the server's reply to a client nonce: its own nonce, its proof,
// and the client proof it must then receive (compare with Verify).
func Answer(secret []byte, purpose byte, nc []byte) (ns, serverMAC, wantClient []byte, err error) {
	if len(nc) != NonceSize {
		return nil, nil, nil, fmt.Errorf("%w: client nonce of %d bytes, want %d", ErrDenied, len(nc), NonceSize)
	}
	if ns, err = Nonce(); err != nil {
		return nil, nil, nil, err
	}
	return ns, ServerMAC(secret, purpose, nc, ns), ClientMAC(secret, purpose, nc, ns), nil
}

// Prove checks the server's answer to the client nonce nc and returns the
// client's proof.
func Prove(secret []byte, purpose byte, nc, ns, serverMAC []byte) ([]byte, error) {
	if len(ns) != NonceSize || !hmac.Equal(serverMAC, ServerMAC(secret, purpose, nc, ns)) {
		return nil, fmt.Errorf("%w: the server does not know the cluster secret", ErrDenied)
	}
	return ClientMAC(secret, purpose, nc, ns), nil
}

// Verify compares a received proof with the expected one in constant time.
func Verify(got, want []byte) bool {
	return len(want) == MACSize && hmac.Equal(got, want)
}
