package otp_test

import (
	"bytes"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"testing"

	potp "github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"

	"github.com/authsrv/authsrv/otp"
)

// Seeds are in testdata/fuzz/<FuzzName>/ and in the f.Add calls.

func FuzzParseKey(f *testing.F) {
	f.Add("3132333435363738393031323334353637383930", "hex")
	f.Add(rfcKeyBase32Check, "base32check")
	f.Add("pyfbeqrr====", "base32check")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, s, format string) {
		key, err := otp.ParseKey(s, format)
		if err != nil {
			if !errors.Is(err, otp.ErrKeyFormat) && !errors.Is(err, otp.ErrKeyChecksum) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if len(key) == 0 {
			t.Fatal("empty key without error")
		}
		for _, enc := range []struct{ s, format string }{
			{hex.EncodeToString(key), otp.KeyFormatHex},
			{otp.FormatBase32Check(key), otp.KeyFormatBase32Check},
		} {
			again, err := otp.ParseKey(enc.s, enc.format)
			if err != nil || !bytes.Equal(again, key) {
				t.Fatalf("%s round trip: %x, %v; want %x", enc.format, again, err, key)
			}
		}
	})
}

func FuzzHOTPMatchesPquerna(f *testing.F) {
	f.Add([]byte("12345678901234567890"), uint64(0), uint8(6), uint8(0))
	f.Add([]byte("12345678901234567890123456789012"), uint64(1<<40), uint8(8), uint8(1))
	f.Add([]byte{}, uint64(1<<63), uint8(10), uint8(2))
	f.Fuzz(func(t *testing.T, key []byte, counter uint64, digits, hashIdx uint8) {
		d := otp.MinDigits + int(digits)%(otp.MaxDigits-otp.MinDigits+1)
		h := []otp.Hash{otp.SHA1, otp.SHA256, otp.SHA512}[int(hashIdx)%3]
		alg := map[otp.Hash]potp.Algorithm{otp.SHA1: potp.AlgorithmSHA1, otp.SHA256: potp.AlgorithmSHA256, otp.SHA512: potp.AlgorithmSHA512}[h]
		want, err := hotp.GenerateCodeCustom(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(key), counter,
			hotp.ValidateOpts{Digits: potp.Digits(d), Algorithm: alg})
		if err != nil {
			t.Fatal(err)
		}
		if got := otp.HOTP(key, counter, d, h); got != want {
			t.Fatalf("HOTP(%x, %d, %d, %s) = %q, pquerna %q", key, counter, d, h, got, want)
		}
		if c, ok := otp.CheckHOTP(key, want, counter, 1, d, h); !ok || c != counter {
			t.Fatalf("CheckHOTP misses its own value")
		}
	})
}
