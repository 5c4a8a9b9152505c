package otp_test

import (
	"errors"
	"slices"
	"testing"

	"unicode/utf8"

	"github.com/authsrv/authsrv/internal/otp"
)

// Seeds are in testdata/fuzz/<FuzzName>/ and in the f.Add calls.

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
