package otp

import (
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"

	potp "github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
)

// Limits of the OTP length. privacyIDEA offers 6 and 8; RFC 4226 allows
// more, and the 31-bit truncated value has at most 10 digits.
const (
	MinDigits = 6
	MaxDigits = 10
)

// ErrDigits is returned for an OTP length outside MinDigits..MaxDigits.
var ErrDigits = errors.New("otp: digits out of range")

// ValidateDigits reports whether n is a usable OTP length, so that callers can
// reject a bad otplen at enrollment instead of failing every later check.
func ValidateDigits(n int) error {
	if n < MinDigits || n > MaxDigits {
		return fmt.Errorf("%w: %d (want %d..%d)", ErrDigits, n, MinDigits, MaxDigits)
	}
	return nil
}

var b32NoPad = base32.StdEncoding.WithPadding(base32.NoPadding)

// generator computes HOTP values for one key; pquerna/otp takes base32
// secrets, so the key is converted once per check, not once per counter.
type generator struct {
	secret string
	opts   hotp.ValidateOpts
}

func newGenerator(key []byte, digits int, h Hash) (generator, bool) {
	alg, ok := h.algorithm()
	if !ok || ValidateDigits(digits) != nil {
		return generator{}, false
	}
	return generator{
		secret: b32NoPad.EncodeToString(key),
		opts:   hotp.ValidateOpts{Digits: potp.Digits(digits), Algorithm: alg},
	}, true
}

func (g generator) code(counter uint64) string {
	// The secret is valid base32 by construction, so there is no error.
	c, err := hotp.GenerateCodeCustom(g.secret, counter, g.opts)
	if err != nil {
		return ""
	}
	return c
}

// HOTP returns the RFC 4226 value of key at counter. It returns "" when
// digits or h is invalid (see ValidateDigits and ParseHash), which no check
// accepts.
func HOTP(key []byte, counter uint64, digits int, h Hash) string {
	g, ok := newGenerator(key, digits, h)
	if !ok {
		return ""
	}
	return g.code(counter)
}

// CheckHOTP looks for otp among the counters from … from+window-1 and returns
// the lowest matching counter; the caller stores counter+1 as the next
// expected one. Counters below from never match, which is HOTP's replay
// protection. otp must have exactly digits characters. Every counter of the
// window is computed and compared in constant time.
func CheckHOTP(key []byte, otp string, from uint64, window int, digits int, h Hash) (counter uint64, ok bool) {
	g, valid := newGenerator(key, digits, h)
	if !valid || window <= 0 || len(otp) != digits {
		return 0, false
	}
	return g.search(otp, from, uint64(window))
}

// search compares otp with the values at from … from+n-1 (stopping at the
// largest counter) without an early exit, and returns the first match.
func (g generator) search(otp string, from, n uint64) (uint64, bool) {
	want := []byte(otp)
	var found int
	var matched uint64
	for i := uint64(0); i < n; i++ {
		c := from + i
		if c < from { // wrapped past the largest counter
			break
		}
		eq := subtle.ConstantTimeCompare([]byte(g.code(c)), want)
		take := eq &^ found
		mask := -uint64(take)
		matched = c&mask | matched&^mask
		found |= eq
	}
	return matched, found == 1
}
