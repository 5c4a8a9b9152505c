package secret_test

import (
	"bytes"
	"fmt"

	"github.com/authsrv/authsrv/internal/secret"
)

func ExampleSealer() {
	// A server loads its key with LoadOrCreateKeyFile; a fixed one here.
	key := bytes.Repeat([]byte{7}, secret.KeySize)
	s, err := secret.NewSealer(nil, key)
	if err != nil {
		panic(err)
	}

	// Bind the seed to its record: bucket, record key, field.
	ct, err := s.Seal([]byte("3132333435363738393031323334353637383930"), "tokens", "HOTP0001", "seed")
	if err != nil {
		panic(err)
	}

	seed, err := s.Open(ct, "tokens", "HOTP0001", "seed")
	fmt.Printf("%s %v\n", seed, err)

	// The same ciphertext copied to another token does not open.
	_, err = s.Open(ct, "tokens", "HOTP0002", "seed")
	fmt.Println(err)
	// Output:
	// 3132333435363738393031323334353637383930 <nil>
	// secret: cannot decrypt
}
