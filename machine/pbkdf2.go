package machine

import (
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"io"
	"strconv"
	"strings"

	"golang.org/x/crypto/pbkdf2"

	"github.com/authsrv/authsrv/apierr"
)

// The bounds of the PBKDF2-SHA512 hashes of the offline application, in
// passlib's pbkdf2_sha512 format. passlib itself takes 1 to 2^32-1
// rounds; we take at most a million, so that verifying one foreign hash
// costs at most about half a second of one core, and a whole issue (count
// hashes) at most PBKDF2MaxWork iterations.
const (
	PBKDF2MinRounds = 1
	PBKDF2MaxRounds = 1_000_000
	// PBKDF2MaxWork bounds count × rounds of one issue of offline values
	// (the default 100 × 6549 is 654,900; about 0.5 µs per iteration).
	PBKDF2MaxWork = 10_000_000
	// pbkdf2SaltLen is the salt passlib's offline hashes use (salt_size=10).
	pbkdf2SaltLen = 10
	// pbkdf2KeyLen is SHA-512's output, passlib's checksum size.
	pbkdf2KeyLen = 64
	// maxPBKDF2Salt bounds a foreign salt (passlib allows up to 1024 bytes).
	maxPBKDF2Salt = 1024
	pbkdf2Prefix  = "$pbkdf2-sha512$"
)

// ErrPBKDF2Format is a string that is not a $pbkdf2-sha512$ hash within
// the bounds.
var ErrPBKDF2Format = apierr.New(apierr.Parameter, "The hash is not a pbkdf2-sha512 hash within the supported rounds.")

// ab64 is passlib's "adapted base64": the standard alphabet with '.'
// instead of '+', without padding.
var ab64 = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./").WithPadding(base64.NoPadding)

// PBKDF2Hash hashes password with PBKDF2-HMAC-SHA512, rounds iterations
// and a 10-byte salt read from rand, as passlib's pbkdf2_sha512 writes it:
// $pbkdf2-sha512$<rounds>$<salt>$<checksum>.
func PBKDF2Hash(password string, rounds int, rand io.Reader) (string, error) {
	if rounds < PBKDF2MinRounds || rounds > PBKDF2MaxRounds {
		return "", errRounds()
	}
	salt := make([]byte, pbkdf2SaltLen)
	if _, err := io.ReadFull(rand, salt); err != nil {
		return "", err
	}
	return pbkdf2Encode(password, rounds, salt), nil
}

// pbkdf2Encode is the hash of password with a given salt.
func pbkdf2Encode(password string, rounds int, salt []byte) string {
	sum := pbkdf2.Key([]byte(password), salt, rounds, pbkdf2KeyLen, sha512.New)
	var b strings.Builder
	b.Grow(len(pbkdf2Prefix) + 8 + ab64.EncodedLen(len(salt)) + ab64.EncodedLen(len(sum)) + 2)
	b.WriteString(pbkdf2Prefix)
	b.WriteString(strconv.Itoa(rounds))
	b.WriteByte('$')
	b.WriteString(ab64.EncodeToString(salt))
	b.WriteByte('$')
	b.WriteString(ab64.EncodeToString(sum))
	return b.String()
}

// PBKDF2Verify reports whether password matches encoded, a passlib
// $pbkdf2-sha512$ hash (any salt size up to 1024 bytes, rounds within
// PBKDF2MinRounds..PBKDF2MaxRounds; ErrPBKDF2Format otherwise). The
// checksums are compared in constant time.
func PBKDF2Verify(encoded, password string) (bool, error) {
	rest, ok := strings.CutPrefix(encoded, pbkdf2Prefix)
	if !ok {
		return false, ErrPBKDF2Format
	}
	parts := strings.Split(rest, "$")
	if len(parts) != 3 {
		return false, ErrPBKDF2Format
	}
	rounds, err := strconv.Atoi(parts[0])
	// passlib writes rounds without leading zeros; so do we.
	if err != nil || rounds < PBKDF2MinRounds || rounds > PBKDF2MaxRounds || strconv.Itoa(rounds) != parts[0] {
		return false, ErrPBKDF2Format
	}
	salt, err := ab64.DecodeString(parts[1])
	if err != nil || len(salt) > maxPBKDF2Salt {
		return false, ErrPBKDF2Format
	}
	want, err := ab64.DecodeString(parts[2])
	if err != nil || len(want) != pbkdf2KeyLen {
		return false, ErrPBKDF2Format
	}
	got := pbkdf2.Key([]byte(password), salt, rounds, pbkdf2KeyLen, sha512.New)
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

func errRounds() error {
	return apierr.Newf(apierr.Parameter, "rounds must be between %d and %d.", PBKDF2MinRounds, PBKDF2MaxRounds)
}
