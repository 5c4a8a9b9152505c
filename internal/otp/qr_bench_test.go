package otp_test

import (
	"testing"

	"github.com/authsrv/authsrv/internal/otp"
)

func BenchmarkQRDataURI(b *testing.B) {
	uri := "otpauth://hotp/OATH0001A2B3?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&counter=1&digits=6&issuer=privacyIDEA&algorithm=SHA1"
	for b.Loop() {
		if _, err := otp.QRDataURI(uri); err != nil {
			b.Fatal(err)
		}
	}
}
