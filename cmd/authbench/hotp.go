package main

import (
	"github.com/authsrv/authsrv/internal/otp"
)

// otpDigits is the OTP length of the enrolled tokens (the server default).
const otpDigits = 6

// hotpGen computes RFC 4226 HOTP values (HMAC-SHA-1) for one key, with the
// server's own implementation (internal/otp, checked against pquerna/otp
// and the RFC's vectors).
type hotpGen struct {
	key    []byte
	digits int
}

// newHOTP returns a generator of digits-long values (6 to 9) for key.
func newHOTP(key []byte, digits int) *hotpGen {
	if digits < 6 || digits > 9 {
		panic("authbench: HOTP digits must be 6 to 9")
	}
	return &hotpGen{key: key, digits: digits}
}

// At returns the value for counter, zero-padded to the generator's length.
func (g *hotpGen) At(counter uint64) string { return otp.HOTP(g.key, counter, g.digits, otp.SHA1) }
