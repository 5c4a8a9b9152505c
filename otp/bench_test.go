package otp_test

import (
	"testing"
	"time"

	"github.com/authsrv/authsrv/otp"
)

// BenchmarkCheckHOTP measures a failed check over the default count window,
// the worst case (every value is computed on success too).
func BenchmarkCheckHOTP(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := otp.CheckHOTP(rfcKey, "000000", 100, 10, 6, otp.SHA1); ok {
			b.Fatal("matched")
		}
	}
}

// BenchmarkCheckTOTP measures a check over privacyIDEA's default window
// (180 s / 30 s: 12 steps).
func BenchmarkCheckTOTP(b *testing.B) {
	now := time.Unix(1767225600, 0)
	v := otp.TOTP(rfcKey, now, 30, 0, 6, otp.SHA1)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := otp.CheckTOTP(rfcKey, v, now, 30, 180, 0, 0, false, 6, otp.SHA1); !ok {
			b.Fatal("no match")
		}
	}
}
