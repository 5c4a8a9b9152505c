// Package otp owns authsrv's one-time-password algorithms and the enrollment
// artefacts built from a token key: HOTP (RFC 4226), TOTP (RFC 6238) with
// privacyIDEA's asymmetric window, the day password, mOTP, Yubico OTP
// decryption, privacyIDEA key formats (hex and base32check), random strings
// by privacyIDEA contents codes, token serials, otpauth:// and oathtoken://
// URLs and QR code data URIs.
//
// It sits on the lowest floor: it imports the standard library,
// github.com/pquerna/otp and github.com/boombuler/barcode, and nothing of
// authsrv, so that the token subsystem can use it without cycles. It keeps no
// state: callers load the key, the counter or last used step, and store what
// a check returns. Its errors are plain sentinels; callers map them to apierr
// codes at their own boundary. It never logs.
//
// # Counters and replay
//
// Every check returns the counter it matched, because the caller must store
// it (RFC 4226 §7.2, RFC 6238 §5.2). HOTP callers pass the next expected
// counter as from, so used values are outside the window; TOTP, mOTP and
// day-password counters are time steps, and TOTP and mOTP checks reject a
// step at or below the last used one. Candidate values are compared in
// constant time and every candidate of a window is computed, so the time a
// check takes does not depend on where (or whether) the OTP matched.
package otp
