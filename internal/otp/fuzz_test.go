package otp_test

import (
	"bytes"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	potp "github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"unicode/utf8"

	"github.com/authsrv/authsrv/internal/otp"
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

func FuzzParseYubico(f *testing.F) {
	key := []byte{0xec, 0xde, 0x18, 0xdb, 0xe7, 0x6f, 0xbd, 0x0c, 0x33, 0x33, 0x0f, 0x1c, 0x35, 0x48, 0x71, 0xdb}
	f.Add("dteffujehknhfjbrjnlnldnhcujvddbikngjrtgh", key)
	f.Add("hknhfjbrjnlnldnhcujvddbikngjrtgh", key)
	f.Add("DTEFFUJEHKNHFJBRJNLNLDNHCUJVDDBIKNGJRTGH", key[:15])
	f.Fuzz(func(t *testing.T, s string, key []byte) {
		y, err := otp.ParseYubico(s, key)
		if err != nil {
			if !errors.Is(err, otp.ErrYubicoFormat) && !errors.Is(err, otp.ErrYubicoCRC) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if len(y.PrivateID) != otp.YubicoPrivateIDLen || y.Counter != uint32(y.UseCounter)<<8|uint32(y.SessionCounter) || y.Timestamp >= 1<<24 {
			t.Fatalf("inconsistent token %#v", y)
		}
		if len(y.PublicID)+otp.YubicoTokenLength != len(s) {
			t.Fatalf("public id %q of %q", y.PublicID, s)
		}
	})
}

func FuzzGenerateContents(f *testing.F) {
	for _, c := range []string{"", "c", "n", "s", "8", "cns", "+cns", "-s", "-cn", "[abc]", "+n[#!]", "-[abc]s", "[äöü]"} {
		f.Add(c, 16, uint64(1))
	}
	f.Fuzz(func(t *testing.T, contents string, length int, seed uint64) {
		length %= 300 // keep each run fast; the bound itself is tested elsewhere
		s, err := otp.Generate(length, contents, seeded(seed))
		alphabet, required, perr := otp.ParseContents(contents)
		if err != nil {
			if !errors.Is(err, otp.ErrContents) {
				t.Fatalf("error %v is not ErrContents", err)
			}
			if perr == nil && length >= len(required) && length >= 1 {
				t.Fatalf("Generate failed on a valid code: %v", err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("Generate accepted a code the parser rejects: %v", perr)
		}
		if !utf8.ValidString(s) || utf8.RuneCountInString(s) != length {
			t.Fatalf("Generate(%d, %q) = %q", length, contents, s)
		}
		for _, r := range s {
			if !slices.Contains(alphabet, r) {
				t.Fatalf("%q is outside the alphabet of %q", r, contents)
			}
		}
		for _, g := range required {
			if !slices.ContainsFunc([]rune(s), func(r rune) bool { return slices.Contains(g, r) }) {
				t.Fatalf("%q has no character of required group %q", s, string(g))
			}
		}
	})
}

// FuzzHOTPMatchesPquerna: our HMAC loop gives pquerna/otp's values for
// every key, counter, length and hash.
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
