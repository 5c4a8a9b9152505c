package otp

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode/decoder"
	"github.com/makiuchi-d/gozxing/qrcode/encoder"
)

// TestQREncodeMatchesZXing: the encoder gives, module for module, the
// code ZXing's encoder (gozxing) gives for the same content: the same
// mode, version, codewords, placement, format and version information,
// and, as both apply the standard's penalty rules, the same mask. Every
// mask is compared too, forced on both sides.
func TestQREncodeMatchesZXing(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 17))
	alphabets := []string{"0123456789", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 $%*+-./:",
		"abcdefghijklmnopqrstuvwxyz0123456789?&=%/:", "äöüßé€日本"}
	var contents []string
	for i := range 400 {
		alpha := []rune(alphabets[i%len(alphabets)])
		// Lengths up to version 40, more of them small.
		n := rng.IntN(80)
		if i%3 == 0 {
			n = rng.IntN(2300)
		}
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteRune(alpha[rng.IntN(len(alpha))])
		}
		contents = append(contents, sb.String())
	}
	contents = append(contents, "", "0", "A", "a",
		"otpauth://hotp/OATH0001A2B3?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&counter=1&digits=6&issuer=privacyIDEA&algorithm=SHA1")
	versions := map[int]bool{}
	for _, c := range contents {
		n, mods, err := qrEncode(c)
		if err != nil {
			t.Fatalf("%d bytes: %v", len(c), err)
		}
		want, zerr := encoder.Encoder_encode(c, decoder.ErrorCorrectionLevel_M, nil)
		if zerr != nil {
			t.Fatalf("gozxing, %d bytes: %v", len(c), zerr)
		}
		if got, zv := (n-17)/4, want.GetVersion().GetVersionNumber(); got != zv {
			// ZXing estimates the character count length from a
			// provisional version: it may take a larger version than the
			// smallest that holds the content.
			if got > zv {
				t.Fatalf("%d bytes: version %d, ZXing's %d", len(c), got, zv)
			}
			continue
		}
		versions[(n-17)/4] = true
		sameModules(t, fmt.Sprintf("%d bytes", len(c)), n, mods, want.GetMatrix())
		if len(c) < 200 && len(c)%5 == 0 {
			m, _, err := qrLayout(c)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, n*n)
			for mask := range 8 {
				m.masked(buf, mask)
				z, zerr := encoder.Encoder_encode(c, decoder.ErrorCorrectionLevel_M, map[gozxing.EncodeHintType]any{gozxing.EncodeHintType_QR_MASK_PATTERN: mask})
				if zerr != nil {
					t.Fatal(zerr)
				}
				sameModules(t, fmt.Sprintf("%d bytes, mask %d", len(c), mask), n, buf, z.GetMatrix())
				if got, want := qrPenalty(buf, make([]byte, n*n), n), zxingPenalty(z.GetMatrix()); got != want {
					t.Fatalf("%d bytes, mask %d: penalty %d, ZXing's %d", len(c), mask, got, want)
				}
			}
		}
	}
	if len(versions) < 35 {
		t.Errorf("only %d versions were compared", len(versions))
	}
}

func sameModules(t *testing.T, what string, n int, mods []byte, want *encoder.ByteMatrix) {
	t.Helper()
	if want.GetWidth() != n {
		t.Fatalf("%s: %d modules, ZXing's %d", what, n, want.GetWidth())
	}
	for y := range n {
		for x := range n {
			if int8(mods[y*n+x]) != want.Get(x, y) {
				t.Fatalf("%s: module (%d,%d) is %d, ZXing's %d", what, x, y, mods[y*n+x], want.Get(x, y))
			}
		}
	}
}

func zxingPenalty(m *encoder.ByteMatrix) int {
	return encoder.MaskUtil_applyMaskPenaltyRule1(m) + encoder.MaskUtil_applyMaskPenaltyRule2(m) +
		encoder.MaskUtil_applyMaskPenaltyRule3(m) + encoder.MaskUtil_applyMaskPenaltyRule4(m)
}
