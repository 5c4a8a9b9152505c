package otp

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"

	"github.com/boombuler/barcode/qr"
)

// QR rendering as privacyIDEA serves it: 10 pixels per module and the
// standard 4-module quiet zone.
const (
	QRScale  = 10
	QRBorder = 4
)

// QRDataURI renders content as a QR code (error correction level M, mode
// chosen automatically) and returns it as a "data:image/png;base64,…" URI,
// the img value of privacyIDEA's init detail. The PNG is 1-bit black on
// white, (modules + 2·QRBorder)·QRScale pixels square.
func QRDataURI(content string) (string, error) {
	code, err := qr.Encode(content, qr.M, qr.Auto)
	if err != nil {
		return "", fmt.Errorf("otp: qr code: %w", err)
	}
	n := code.Bounds().Dx()
	size := (n + 2*QRBorder) * QRScale
	img := image.NewPaletted(image.Rect(0, 0, size, size), color.Palette{color.White, color.Black})
	for y := range n {
		for x := range n {
			if color.GrayModel.Convert(code.At(code.Bounds().Min.X+x, code.Bounds().Min.Y+y)).(color.Gray).Y >= 128 {
				continue
			}
			x0, y0 := (x+QRBorder)*QRScale, (y+QRBorder)*QRScale
			for py := y0; py < y0+QRScale; py++ {
				row := img.Pix[py*img.Stride:]
				for px := x0; px < x0+QRScale; px++ {
					row[px] = 1
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return "", fmt.Errorf("otp: png: %w", err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
