package otp

import (
	"crypto/sha1"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Key formats of privacyIDEA's otpkeyformat parameter.
const (
	KeyFormatHex         = "hex"
	KeyFormatBase32Check = "base32check"
)

// Errors of key parsing.
var (
	// ErrKeyFormat is returned for an unknown format or undecodable key text.
	ErrKeyFormat = errors.New("otp: invalid key")
	// ErrKeyChecksum is returned when a base32check key fails its checksum.
	ErrKeyChecksum = errors.New("otp: key checksum mismatch")
)

const base32CheckSumLen = 4

// ParseKey decodes an otpkey parameter. format is "hex" (also "") or
// "base32check": unpadded base32 of sha1(payload)[:4] + payload, whose
// checksum catches typing errors in keys entered by hand. Hex and base32
// are accepted in either case; an empty key is an error. Error messages never
// contain the key.
func ParseKey(s, format string) ([]byte, error) {
	switch strings.ToLower(format) {
	case "", KeyFormatHex:
		if s == "" {
			return nil, fmt.Errorf("%w: empty", ErrKeyFormat)
		}
		k, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: not hex", ErrKeyFormat)
		}
		return k, nil
	case KeyFormatBase32Check:
		return parseBase32Check(s)
	}
	return nil, fmt.Errorf("%w: unknown format %q", ErrKeyFormat, format)
}

func parseBase32Check(s string) ([]byte, error) {
	raw, err := b32NoPad.DecodeString(strings.ToUpper(strings.TrimRight(s, "=")))
	if err != nil {
		return nil, fmt.Errorf("%w: not base32", ErrKeyFormat)
	}
	if len(raw) <= base32CheckSumLen {
		return nil, fmt.Errorf("%w: base32check key too short", ErrKeyFormat)
	}
	sum, payload := raw[:base32CheckSumLen], raw[base32CheckSumLen:]
	want := sha1.Sum(payload)
	if subtle.ConstantTimeCompare(sum, want[:base32CheckSumLen]) != 1 {
		return nil, ErrKeyChecksum
	}
	return payload, nil
}

// FormatBase32 returns key as unpadded base32, the secret of otpauth URLs
// and the value_b32 of privacyIDEA's init detail.
func FormatBase32(key []byte) string {
	return b32NoPad.EncodeToString(key)
}

// FormatBase32Check returns key in the base32check format that ParseKey
// reads.
func FormatBase32Check(key []byte) string {
	sum := sha1.Sum(key)
	return b32NoPad.EncodeToString(append(sum[:base32CheckSumLen:base32CheckSumLen], key...))
}
