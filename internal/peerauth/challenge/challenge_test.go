package challenge

import (
	"bytes"
	"errors"
	"testing"
)

func TestExchange(t *testing.T) {
	secret := []byte("k3y")
	nc, err := Nonce()
	if err != nil {
		t.Fatal(err)
	}
	ns, serverMAC, want, err := Answer(secret, PurposeInternal, nc)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := Prove(secret, PurposeInternal, nc, ns, serverMAC)
	if err != nil {
		t.Fatalf("the client rejected a genuine server: %v", err)
	}
	if !Verify(proof, want) {
		t.Fatal("the server rejected a genuine client")
	}
	for name, try := range map[string]func() ([]byte, error){
		"another secret":  func() ([]byte, error) { return Prove([]byte("other"), PurposeInternal, nc, ns, serverMAC) },
		"another purpose": func() ([]byte, error) { return Prove(secret, PurposeRaft, nc, ns, serverMAC) },
		"another nonce":   func() ([]byte, error) { return Prove(secret, PurposeInternal, ns, ns, serverMAC) },
		// A server that reflects the client's own nonce and proof.
		"reflected": func() ([]byte, error) {
			return Prove(secret, PurposeInternal, nc, nc, ClientMAC(secret, PurposeInternal, nc, nc))
		},
	} {
		if _, err := try(); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v, want ErrDenied", name, err)
		}
	}
	if Verify(ServerMAC(secret, PurposeInternal, nc, ns), want) {
		t.Error("the server's own proof verified as the client's")
	}
	if _, _, _, err := Answer(secret, PurposeInternal, nc[:5]); !errors.Is(err, ErrDenied) {
		t.Errorf("Answer to a short nonce: %v", err)
	}
}

// FuzzProve: no answer made without the secret convinces a client.
func FuzzProve(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, NonceSize), bytes.Repeat([]byte{2}, MACSize))
	f.Add([]byte{}, []byte{})
	nc := bytes.Repeat([]byte{'c'}, NonceSize)
	f.Fuzz(func(t *testing.T, ns, serverMAC []byte) {
		if _, err := Prove([]byte("secret"), PurposeInternal, nc, ns, serverMAC); err == nil {
			t.Fatalf("an answer without the secret was accepted: %x %x", ns, serverMAC)
		}
	})
}
