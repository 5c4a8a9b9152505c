package otp_test

// rfcKey is the RFC 4226/6238 SHA-1 seed "12345678901234567890" (spec §7.1).
var rfcKey = []byte("12345678901234567890")
