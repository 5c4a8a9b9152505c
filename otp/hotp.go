package otp

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
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

// generator computes HOTP values for one key. The HMAC (the hash comes
// from pquerna/otp's algorithm) is keyed once per check and reset for each
// counter of the window: the window search is the hot loop of every
// authentication, and pquerna's GenerateCodeCustom decodes a base32 secret
// and keys a new HMAC on every call. FuzzHOTPMatchesPquerna keeps the two
// in agreement.
type generator struct {
	mac    hash.Hash
	digits int
	sum    []byte
}

func newGenerator(key []byte, digits int, h Hash) (generator, bool) {
	alg, ok := h.algorithm()
	if !ok || ValidateDigits(digits) != nil {
		return generator{}, false
	}
	mac := hmac.New(alg.Hash, key)
	return generator{mac: mac, digits: digits, sum: make([]byte, 0, mac.Size())}, true
}

// pow10 are the moduli of the digit counts.
var b32NoPad = base32.StdEncoding.WithPadding(base32.NoPadding)

var pow10 = [...]uint64{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000}

// code is RFC 4226 §5.3: HMAC of the big-endian counter, dynamic
// truncation to 31 bits, the low digits, zero-padded.
func (g *generator) code(counter uint64) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	g.mac.Reset()
	g.mac.Write(msg[:])
	g.sum = g.mac.Sum(g.sum[:0])
	off := g.sum[len(g.sum)-1] & 0x0f
	v := uint64(binary.BigEndian.Uint32(g.sum[off:]) & 0x7fffffff)
	var out [MaxDigits]byte
	v %= pow10[g.digits]
	for i := g.digits - 1; i >= 0; i-- {
		out[i] = byte('0' + v%10)
		v /= 10
	}
	return string(out[:g.digits])
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
func (g *generator) search(otp string, from, n uint64) (uint64, bool) {
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
