package otp

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
)

// QR rendering as privacyIDEA serves it: 10 pixels per module and the
// standard 4-module quiet zone.
const (
	QRScale  = 10
	QRBorder = 4
)

// QRDataURI renders content as a QR code (error correction level M, one
// segment in the smallest of the numeric, alphanumeric or byte modes that
// holds it, bytes as given without an ECI header) and returns it as a
// "data:image/png;base64,…" URI, the img value of privacyIDEA's init
// detail. The PNG is 1-bit black on white, (modules + 2·QRBorder)·QRScale
// pixels square.
func QRDataURI(content string) (string, error) {
	n, mods, err := qrEncode(content)
	if err != nil {
		return "", fmt.Errorf("otp: qr code: %w", err)
	}
	raw, err := qrPNG(n, func(x, y int) bool { return mods[y*n+x] == 1 })
	if err != nil {
		return "", fmt.Errorf("otp: png: %w", err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(raw), nil
}

// zlibWriters keeps deflate's state (about a megabyte) between images.
var zlibWriters = sync.Pool{New: func() any {
	z, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed) // a valid level: no error
	return z
}}

// qrPNG encodes n×n modules, with the quiet zone, as a 1-bit grayscale
// PNG at QRScale pixels per module. It writes the rows itself: image/png
// asks the image for every pixel's colour index, which cost more than the
// QR encoding. Each module row is one packed row followed by QRScale-1
// rows with PNG's "Up" filter (all zero: same as the row above), which
// deflate compresses at almost no cost.
func qrPNG(n int, dark func(x, y int) bool) ([]byte, error) {
	size := (n + 2*QRBorder) * QRScale
	stride := 1 + (size+7)/8 // filter byte, then 8 pixels a byte
	white := make([]byte, stride)
	for i := 1; i < stride; i++ {
		white[i] = 0xff
	}
	same := make([]byte, stride)
	same[0] = 2 // filter "Up", every difference 0
	row := make([]byte, stride)
	var idat bytes.Buffer
	z := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(z)
	z.Reset(&idat)
	// band writes r (filter "none") and repeats it for times-1 rows.
	band := func(r []byte, times int) {
		_, _ = z.Write(r) // a bytes.Buffer does not fail
		for range times - 1 {
			_, _ = z.Write(same)
		}
	}
	band(white, QRBorder*QRScale)
	for y := range n {
		copy(row, white)
		for x := range n {
			if !dark(x, y) {
				continue
			}
			for px := (x + QRBorder) * QRScale; px < (x+QRBorder+1)*QRScale; px++ {
				row[1+px/8] &^= 0x80 >> (px % 8)
			}
		}
		band(row, QRScale)
	}
	band(white, QRBorder*QRScale)
	if err := z.Close(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(size))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(size))
	ihdr[8], ihdr[9] = 1, 0 // bit depth 1, grayscale; compression, filter and interlace 0
	pngChunk(&out, "IHDR", ihdr[:])
	pngChunk(&out, "IDAT", idat.Bytes())
	pngChunk(&out, "IEND", nil)
	return out.Bytes(), nil
}

// pngChunk appends one PNG chunk: length, type, data and the CRC-32 of
// type and data.
func pngChunk(out *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	out.Write(n[:])
	crc := crc32.NewIEEE()
	_, _ = crc.Write([]byte(typ))
	_, _ = crc.Write(data)
	out.WriteString(typ)
	out.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	out.Write(n[:])
}
