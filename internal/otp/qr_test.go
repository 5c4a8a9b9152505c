package otp_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/boombuler/barcode/qr"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/authsrv/authsrv/internal/otp"
)

// qrContents are typical enrollment contents and every encoding mode.
var qrContents = []struct {
	name, content string
}{
	{"otpauth url", "otpauth://hotp/OATH0001A1B2?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&counter=1&digits=6&creator=privacyidea&issuer=privacyIDEA&serial=OATH0001A1B2"},
	{"seed", "seed://3132333435363738393031323334353637383930"},
	{"oath url", "oathtoken:///addToken?name=TOTP0003A7F2&lockdown=true&key=3132333435363738393031323334353637383930&timeBased=true"},
	{"numeric", "12345678"},
	{"alphanumeric", "OATH0001 $%*+-./:"},
	{"utf-8", "otpauth://totp/M%C3%BCller?issuer=Müller"},
	{"one byte", "a"},
}

// decodePNG checks the image's geometry (size, quiet zone, every module a
// uniform QRScale square) and returns its modules.
func decodePNG(t *testing.T, uri string) (image.Image, [][]bool) {
	t.Helper()
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
	b := img.Bounds()
	if b.Min.X != 0 || b.Min.Y != 0 || b.Dx() != b.Dy() || b.Dx()%otp.QRScale != 0 {
		t.Fatalf("image bounds %v: not a square of whole modules", b)
	}
	n := b.Dx()/otp.QRScale - 2*otp.QRBorder
	if n < 21 || n > 177 || (n-17)%4 != 0 {
		t.Fatalf("%d modules, not a QR size", n)
	}
	dark := func(x, y int) bool { return color.GrayModel.Convert(img.At(x, y)).(color.Gray).Y < 128 }
	mods := make([][]bool, n)
	for my := -otp.QRBorder; my < n+otp.QRBorder; my++ {
		for mx := -otp.QRBorder; mx < n+otp.QRBorder; mx++ {
			x0, y0 := (mx+otp.QRBorder)*otp.QRScale, (my+otp.QRBorder)*otp.QRScale
			d := dark(x0, y0)
			for py := range otp.QRScale {
				for px := range otp.QRScale {
					if dark(x0+px, y0+py) != d {
						t.Fatalf("module (%d,%d) is not one colour", mx, my)
					}
				}
			}
			inside := mx >= 0 && my >= 0 && mx < n && my < n
			if !inside && d {
				t.Fatalf("quiet zone module (%d,%d) is dark", mx, my)
			}
			if inside {
				mods[my] = append(mods[my], d)
			}
		}
	}
	return img, mods
}

// checkDecodes reads img with gozxing's QR reader and checks it holds
// content at error correction level M, in boombuler's version.
func checkDecodes(t *testing.T, img image.Image, n int, content string) {
	t.Helper()
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("QR decode of %q: %v", content, err)
	}
	md := res.GetResultMetadata()
	if ec := fmt.Sprint(md[gozxing.ResultMetadataType_ERROR_CORRECTION_LEVEL]); ec != "M" {
		t.Errorf("error correction level %s, want M", ec)
	}
	// Bytes as written: the reader guesses a text encoding for bytes
	// without an ECI header, which short UTF-8 may defeat.
	var got []byte
	if segs, ok := md[gozxing.ResultMetadataType_BYTE_SEGMENTS].([][]byte); ok {
		got = bytes.Join(segs, nil)
	} else {
		got = []byte(res.GetText())
	}
	if string(got) != content {
		t.Fatalf("QR holds %q, want %q", got, content)
	}
	code, err := qr.Encode(content, qr.M, qr.Auto)
	if err != nil {
		t.Fatal(err)
	}
	if bn := code.Bounds().Dx(); bn != n {
		t.Errorf("%d modules, boombuler's encoding of the same content has %d", n, bn)
	}
}

func TestQRDataURI(t *testing.T) {
	for _, tc := range qrContents {
		t.Run(tc.name, func(t *testing.T) {
			uri, err := otp.QRDataURI(tc.content)
			if err != nil {
				t.Fatal(err)
			}
			img, mods := decodePNG(t, uri)
			checkDecodes(t, img, len(mods), tc.content)
		})
	}
}

// TestQRDataURIMany decodes the codes of random contents of every length
// class (versions 1 to 10 and a few beyond) and alphabet.
func TestQRDataURIMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 2))
	alphabets := []string{"0123456789", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 $%*+-./:",
		"abcdefghijklmnopqrstuvwxyz0123456789?&=%/:", "äöüßéàç€日本"}
	for i := range 120 {
		alpha := []rune(alphabets[i%len(alphabets)])
		n := 1 + rng.IntN(60)
		if i%10 == 0 {
			n += 300
		}
		var sb strings.Builder
		for range n {
			sb.WriteRune(alpha[rng.IntN(len(alpha))])
		}
		content := sb.String()
		uri, err := otp.QRDataURI(content)
		if err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		img, mods := decodePNG(t, uri)
		checkDecodes(t, img, len(mods), content)
	}
}

// TestQRDataURIInvalidUTF8 keeps bytes that are not UTF-8 as they are.
func TestQRDataURIInvalidUTF8(t *testing.T) {
	content := "otpauth://hotp/\xff\xfe?secret=GEZDGNBV"
	uri, err := otp.QRDataURI(content)
	if err != nil {
		t.Fatal(err)
	}
	img, mods := decodePNG(t, uri)
	checkDecodes(t, img, len(mods), content)
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
