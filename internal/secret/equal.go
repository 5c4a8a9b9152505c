package secret

import "crypto/subtle"

// Equal reports whether a and b are equal in time that depends only on their
// lengths, so comparing a secret does not reveal how much of it matched.
func Equal(a, b []byte) bool {
	return subtle.ConstantTimeCompare(a, b) == 1
}

// EqualString is [Equal] for strings, for PINs, OTP values and API keys.
func EqualString(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
