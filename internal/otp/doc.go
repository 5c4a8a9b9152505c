// Package otp owns the token subsystem's one-time-password algorithms that
// are not public: mOTP, Yubico OTP decryption, random strings by
// privacyIDEA contents codes, token serials and QR code data URIs. The
// RFC 4226/6238 algorithms, key formats and URLs live in the public package
// otp, which this one re-exports under the same names so that the token
// subsystem has one import.
//
// It sits just above the lowest floor: it imports the standard library, the
// public otp package and github.com/boombuler/barcode, and nothing else of
// authsrv, so that the token subsystem can use it without
// cycles. It keeps no state: callers load the key or last used step and
// store what a check returns. Its errors are plain sentinels; callers map
// them to apierr codes at their own boundary. It never logs.
//
// # Counters and replay
//
// mOTP counters are time steps, and mOTP checks reject a step at or below
// the last used one. Candidate values are compared in constant time and
// every candidate of a window is computed, so the time a check takes does
// not depend on where (or whether) the OTP matched.
package otp
