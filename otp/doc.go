// Package otp computes and checks the one-time passwords of authsrv's
// HOTP-family tokens: HOTP (RFC 4226), TOTP (RFC 6238) with privacyIDEA's
// asymmetric window, the day password, privacyIDEA's key formats (hex and
// base32check) and otpauth:// and oathtoken:// URLs. It is public so that a
// program embedding authsrv (or its tests) can compute the value a token
// expects without copying RFC 4226; the token subsystem uses it through
// internal/otp.
//
// It sits on the lowest floor: it imports the standard library and
// github.com/pquerna/otp, and nothing of authsrv. It keeps no state: callers
// load the key, the counter or last used step, and store what a check
// returns. Its errors are plain sentinels. It never logs.
//
// # Counters and replay
//
// Every check returns the counter it matched, because the caller must store
// it (RFC 4226 §7.2, RFC 6238 §5.2). HOTP callers pass the next expected
// counter as from, so used values are outside the window; TOTP and
// day-password counters are time steps, and TOTP checks reject a step at or
// below the last used one. Candidate values are compared in constant time
// and every candidate of a window is computed, so the time a check takes
// does not depend on where (or whether) the OTP matched.
package otp
