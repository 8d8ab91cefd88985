package peerauth

import (
	"fmt"
	"io"

	"raftset/internal/peerauth/challenge"
)

// The handshake, with K = the shared secret:
//
//	client → server  hello:  magic "RSPA", version 1, purpose, nonce_c (32 bytes)
//	server → client  answer: magic, nonce_s (32 bytes), HMAC(K, "server" | purpose | nonce_c | nonce_s)
//	client → server  proof:  HMAC(K, "client" | purpose | nonce_s | nonce_c)
//
// The server proves itself first so that a client never sends a proof to an
// impostor; each MAC covers both nonces and the side's label, so neither a
// reflected nor a replayed message verifies. purpose names what the stream
// is for (Raft today; one Raft group among several later), so a proof made
// for one purpose is no good for another.

const (
	magic        = "RSPA"
	version      = 1
	nonceSize    = challenge.NonceSize
	macSize      = challenge.MACSize
	helloSize    = len(magic) + 2 + nonceSize
	answerSize   = len(magic) + nonceSize + macSize
	PurposeRaft  = challenge.PurposeRaft // the stream carries hashicorp/raft's RPCs
	maxSecretLen = 4096
)

// ErrDenied is the error of a handshake whose peer did not prove the secret
// (or spoke something else than this handshake).
var ErrDenied = challenge.ErrDenied

// clientHandshake runs the client side on rw.
func clientHandshake(rw io.ReadWriter, secret []byte, purpose byte) error {
	nc, err := challenge.Nonce()
	if err != nil {
		return err
	}
	hello := make([]byte, 0, helloSize)
	hello = append(hello, magic...)
	hello = append(hello, version, purpose)
	hello = append(hello, nc...)
	if _, err := rw.Write(hello); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	answer := make([]byte, answerSize)
	if _, err := io.ReadFull(rw, answer); err != nil {
		return fmt.Errorf("%w: read answer: %w", ErrDenied, err)
	}
	ns, serverMAC, err := parseAnswer(answer)
	if err != nil {
		return err
	}
	proof, err := challenge.Prove(secret, purpose, nc, ns, serverMAC)
	if err != nil {
		return err
	}
	if _, err := rw.Write(proof); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	return nil
}

// serverHandshake runs the server side on rw; it accepts only purpose.
func serverHandshake(rw io.ReadWriter, secret []byte, purpose byte) error {
	hello := make([]byte, helloSize)
	if _, err := io.ReadFull(rw, hello); err != nil {
		return fmt.Errorf("%w: read hello: %w", ErrDenied, err)
	}
	gotPurpose, nc, err := parseHello(hello)
	if err != nil {
		return err
	}
	if gotPurpose != purpose {
		return fmt.Errorf("%w: stream purpose %d, want %d", ErrDenied, gotPurpose, purpose)
	}
	ns, serverMAC, want, err := challenge.Answer(secret, purpose, nc)
	if err != nil {
		return err
	}
	answer := make([]byte, 0, answerSize)
	answer = append(answer, magic...)
	answer = append(answer, ns...)
	answer = append(answer, serverMAC...)
	if _, err := rw.Write(answer); err != nil {
		return fmt.Errorf("send answer: %w", err)
	}
	proof := make([]byte, macSize)
	if _, err := io.ReadFull(rw, proof); err != nil {
		return fmt.Errorf("%w: read proof: %w", ErrDenied, err)
	}
	if !challenge.Verify(proof, want) {
		return fmt.Errorf("%w: the client does not know the cluster secret", ErrDenied)
	}
	return nil
}

// parseHello checks a client hello's framing and returns its purpose and nonce.
func parseHello(b []byte) (purpose byte, nc []byte, err error) {
	if len(b) != helloSize || string(b[:len(magic)]) != magic {
		return 0, nil, fmt.Errorf("%w: not a raftset peer handshake", ErrDenied)
	}
	if v := b[len(magic)]; v != version {
		return 0, nil, fmt.Errorf("%w: handshake version %d, this node speaks %d", ErrDenied, v, version)
	}
	return b[len(magic)+1], b[len(magic)+2:], nil
}

// parseAnswer checks a server answer's framing and returns nonce_s and its MAC.
func parseAnswer(b []byte) (ns, m []byte, err error) {
	if len(b) != answerSize || string(b[:len(magic)]) != magic {
		return nil, nil, fmt.Errorf("%w: the server did not answer the handshake", ErrDenied)
	}
	return b[len(magic) : len(magic)+nonceSize], b[len(magic)+nonceSize:], nil
}
