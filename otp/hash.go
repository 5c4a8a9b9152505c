package otp

import (
	"errors"
	"fmt"
	"strings"

	potp "github.com/pquerna/otp"
)

// Hash names the HMAC hash of an HOTP-family token, spelled as privacyIDEA's
// hashlib parameter. The zero value means SHA-1, the RFC 4226 default.
type Hash string

// The hashes privacyIDEA offers for HOTP and TOTP tokens.
const (
	SHA1   Hash = "sha1"
	SHA256 Hash = "sha256"
	SHA512 Hash = "sha512"
)

// ErrHash is returned for a hash name other than sha1, sha256 or sha512.
var ErrHash = errors.New("otp: unknown hash")

// ParseHash parses a hashlib value strictly (case-insensitive), so that
// stored tokens with a corrupt hash fail instead of silently using SHA-1.
func ParseHash(s string) (Hash, error) {
	switch h := Hash(strings.ToLower(strings.TrimSpace(s))); h {
	case SHA1, SHA256, SHA512:
		return h, nil
	}
	return "", fmt.Errorf("%w %q", ErrHash, s)
}

// HashOrSHA1 parses a hashlib request parameter the way privacyIDEA's
// /token/init does: an unknown or empty value means SHA-1.
func HashOrSHA1(s string) Hash {
	h, err := ParseHash(s)
	if err != nil {
		return SHA1
	}
	return h
}

// DefaultKeySize returns the generated key length in bytes for h (the HMAC
// output length, RFC 6238 §5.1): 20 for SHA-1, 32 for SHA-256, 64 for
// SHA-512. Unknown hashes get 20.
func DefaultKeySize(h Hash) int {
	switch h {
	case SHA256:
		return 32
	case SHA512:
		return 64
	}
	return 20
}

// String returns the hash name; the zero value reads "sha1".
func (h Hash) String() string {
	if h == "" {
		return string(SHA1)
	}
	return string(h)
}

// algorithm maps h to pquerna/otp's algorithm.
func (h Hash) algorithm() (potp.Algorithm, bool) {
	switch h {
	case "", SHA1:
		return potp.AlgorithmSHA1, true
	case SHA256:
		return potp.AlgorithmSHA256, true
	case SHA512:
		return potp.AlgorithmSHA512, true
	}
	return 0, false
}
