package otp_test

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seeded returns a deterministic random source for tests.
func seeded(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return rand.NewChaCha8(s)
}

// cycleReader returns the bytes 0, 1, …, 255, 0, 1, … forever.
type cycleReader struct{ next byte }

func (r *cycleReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.next
		r.next++
	}
	return len(p), nil
}

// constReader returns the same byte forever.
type constReader byte

func (r constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

var errBroken = errors.New("broken reader")

// brokenReader always fails.
type brokenReader struct{}

func (brokenReader) Read([]byte) (int, error) { return 0, errBroken }
