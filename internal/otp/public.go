package otp

import (
	"time"

	"github.com/authsrv/authsrv/otp"
)

// The RFC 4226/6238 algorithms, key formats and URLs live in the public
// package otp, so that a program embedding authsrv can compute the values
// its tokens expect; the names below keep the token subsystem's calls
// unchanged.

// Hash names the HMAC hash of an HOTP-family token (see otp.Hash).
type Hash = otp.Hash

// URLParams describes an otpauth:// URL (see otp.URLParams).
type URLParams = otp.URLParams

// Param is an extra otpauth:// URL parameter (see otp.Param).
type Param = otp.Param

// The hashes, limits, defaults and key formats of package otp.
const (
	SHA1                   = otp.SHA1
	SHA256                 = otp.SHA256
	SHA512                 = otp.SHA512
	MinDigits              = otp.MinDigits
	MaxDigits              = otp.MaxDigits
	DefaultTimeStep        = otp.DefaultTimeStep
	DefaultTimeWindow      = otp.DefaultTimeWindow
	DefaultDayPasswordStep = otp.DefaultDayPasswordStep
	KeyFormatHex           = otp.KeyFormatHex
	KeyFormatBase32Check   = otp.KeyFormatBase32Check
)

// The sentinel errors of package otp.
var (
	ErrHash        = otp.ErrHash
	ErrDigits      = otp.ErrDigits
	ErrKeyFormat   = otp.ErrKeyFormat
	ErrKeyChecksum = otp.ErrKeyChecksum
)

// ParseHash is otp.ParseHash.
func ParseHash(s string) (Hash, error) { return otp.ParseHash(s) }

// HashOrSHA1 is otp.HashOrSHA1.
func HashOrSHA1(s string) Hash { return otp.HashOrSHA1(s) }

// DefaultKeySize is otp.DefaultKeySize.
func DefaultKeySize(h Hash) int { return otp.DefaultKeySize(h) }

// ValidateDigits is otp.ValidateDigits.
func ValidateDigits(n int) error { return otp.ValidateDigits(n) }

// HOTP is otp.HOTP.
func HOTP(key []byte, counter uint64, digits int, h Hash) string {
	return otp.HOTP(key, counter, digits, h)
}

// CheckHOTP is otp.CheckHOTP.
func CheckHOTP(key []byte, code string, from uint64, window int, digits int, h Hash) (counter uint64, ok bool) {
	return otp.CheckHOTP(key, code, from, window, digits, h)
}

// TOTPCounter is otp.TOTPCounter.
func TOTPCounter(t time.Time, step int, shift int) uint64 { return otp.TOTPCounter(t, step, shift) }

// TOTP is otp.TOTP.
func TOTP(key []byte, t time.Time, step, shift int, digits int, h Hash) string {
	return otp.TOTP(key, t, step, shift, digits, h)
}

// FindTOTP is otp.FindTOTP.
func FindTOTP(key []byte, code string, now time.Time, step, window, shift int, digits int, h Hash) (matched uint64, drift int, ok bool) {
	return otp.FindTOTP(key, code, now, step, window, shift, digits, h)
}

// CheckTOTP is otp.CheckTOTP.
func CheckTOTP(key []byte, code string, now time.Time, step, window, shift int, lastUsed uint64, hasLast bool, digits int, h Hash) (matched uint64, drift int, ok bool) {
	return otp.CheckTOTP(key, code, now, step, window, shift, lastUsed, hasLast, digits, h)
}

// DayPassword is otp.DayPassword.
func DayPassword(key []byte, t time.Time, step int, digits int, h Hash) string {
	return otp.DayPassword(key, t, step, digits, h)
}

// CheckDayPassword is otp.CheckDayPassword.
func CheckDayPassword(key []byte, code string, now time.Time, step int, digits int, h Hash) (matched uint64, ok bool) {
	return otp.CheckDayPassword(key, code, now, step, digits, h)
}

// ParseKey is otp.ParseKey.
func ParseKey(s, format string) ([]byte, error) { return otp.ParseKey(s, format) }

// FormatBase32 is otp.FormatBase32.
func FormatBase32(key []byte) string { return otp.FormatBase32(key) }

// FormatBase32Check is otp.FormatBase32Check.
func FormatBase32Check(key []byte) string { return otp.FormatBase32Check(key) }

// OtpauthURL is otp.OtpauthURL.
func OtpauthURL(p URLParams) string { return otp.OtpauthURL(p) }

// OathURL is otp.OathURL.
func OathURL(label string, key []byte, timeBased bool) string {
	return otp.OathURL(label, key, timeBased)
}
