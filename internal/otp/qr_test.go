package otp_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/boombuler/barcode/qr"

	"github.com/authsrv/authsrv/internal/otp"
)

func TestQRDataURI(t *testing.T) {
	tests := []struct {
		name, content string
	}{
		{"otpauth url", "otpauth://hotp/OATH0001A1B2?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&counter=1&digits=6&creator=privacyidea&issuer=privacyIDEA&serial=OATH0001A1B2"},
		{"seed", "seed://3132333435363738393031323334353637383930"},
		{"oath url", "oathtoken:///addToken?name=TOTP0003A7F2&lockdown=true&key=3132333435363738393031323334353637383930&timeBased=true"},
		{"numeric", "12345678"},
		{"utf-8", "otpauth://totp/M%C3%BCller?issuer=Müller"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uri, err := otp.QRDataURI(tc.content)
			if err != nil {
				t.Fatal(err)
			}
			const prefix = "data:image/png;base64,"
			if !strings.HasPrefix(uri, prefix) {
				t.Fatalf("QRDataURI = %.40q…, want prefix %q", uri, prefix)
			}
			raw, err := base64.StdEncoding.DecodeString(uri[len(prefix):])
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}

			// No QR decoder is available: compare module by module with
			// boombuler's own encoding of the same content.
			code, err := qr.Encode(tc.content, qr.M, qr.Auto)
			if err != nil {
				t.Fatal(err)
			}
			n := code.Bounds().Dx()
			if n < 21 || n > 177 || (n-17)%4 != 0 {
				t.Fatalf("boombuler gave %d modules, not a QR size", n)
			}
			size := (n + 2*otp.QRBorder) * otp.QRScale
			if b := img.Bounds(); b.Dx() != size || b.Dy() != size || b.Min.X != 0 || b.Min.Y != 0 {
				t.Fatalf("image bounds %v, want %dx%d", b, size, size)
			}
			dark := func(x, y int) bool { return color.GrayModel.Convert(img.At(x, y)).(color.Gray).Y < 128 }
			for my := -otp.QRBorder; my < n+otp.QRBorder; my++ {
				for mx := -otp.QRBorder; mx < n+otp.QRBorder; mx++ {
					want := false
					if mx >= 0 && my >= 0 && mx < n && my < n {
						want = color.GrayModel.Convert(code.At(mx, my)).(color.Gray).Y < 128
					}
					x0, y0 := (mx+otp.QRBorder)*otp.QRScale, (my+otp.QRBorder)*otp.QRScale
					// Every pixel of the module's 10×10 square has its colour.
					for _, p := range [][2]int{{0, 0}, {otp.QRScale - 1, 0}, {0, otp.QRScale - 1}, {otp.QRScale - 1, otp.QRScale - 1}, {otp.QRScale / 2, otp.QRScale / 2}} {
						if got := dark(x0+p[0], y0+p[1]); got != want {
							t.Fatalf("module (%d,%d) pixel %v dark=%v, want %v", mx, my, p, got, want)
						}
					}
				}
			}
		})
	}
}

func TestQRDataURITooLong(t *testing.T) {
	_, err := otp.QRDataURI(strings.Repeat("x", 5000))
	if err == nil {
		t.Fatal("QRDataURI accepted 5000 bytes")
	}
	if errors.Unwrap(err) == nil {
		t.Errorf("error %v does not wrap the cause", err)
	}
}
