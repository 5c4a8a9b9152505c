package secret_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
)

// Seeds are in testdata/fuzz/<FuzzName>/.

func FuzzParsePHC(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		p, err := secret.ParsePHC(s)
		if err != nil {
			if !errors.Is(err, secret.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := secret.ParsePHC(p.String())
		if err != nil {
			t.Fatalf("String() of a parsed hash does not parse: %v", err)
		}
		if !samePHC(p, again) {
			t.Fatalf("round trip changed the hash: %+v -> %+v", p, again)
		}
		if again.String() != p.String() {
			t.Fatal("String() is not canonical")
		}
	})
}

// fuzzKey seals the seeds of FuzzOpen; they were sealed with other
// additional data, so even they must not open.
var fuzzKey = bytes.Repeat([]byte{0x42}, secret.KeySize)

func FuzzOpen(f *testing.F) {
	s := newSealer(f, fuzzKey)
	f.Fuzz(func(t *testing.T, ct []byte) {
		pt, err := s.Open(ct, "tokens", "HOTP1", "seed")
		if err != secret.ErrDecrypt || pt != nil {
			t.Fatalf("random ciphertext: %q, %v", pt, err)
		}
	})
}

func FuzzSealOpen(f *testing.F) {
	s := newSealer(f, fuzzKey)
	f.Fuzz(func(t *testing.T, plaintext []byte, ad1, ad2 string) {
		ct, err := s.Seal(plaintext, ad1, ad2)
		if err != nil {
			t.Fatal(err)
		}
		pt, err := s.Open(ct, ad1, ad2)
		if err != nil || !bytes.Equal(pt, plaintext) {
			t.Fatalf("round trip: %v", err)
		}
		for _, ad := range [][]string{{ad1 + ad2}, {ad2, ad1}, {ad1, ad2, ""}, {ad1}} {
			if slices.Equal(ad, []string{ad1, ad2}) {
				continue
			}
			if _, err := s.Open(ct, ad...); err != secret.ErrDecrypt {
				t.Fatalf("opened with additional data %q, sealed with %q", ad, []string{ad1, ad2})
			}
		}
	})
}
