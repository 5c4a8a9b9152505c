package token

import (
	"crypto/rand"
	"io"
	"math/big"

	"github.com/authsrv/authsrv/internal/otp"
)

func randInt(rnd io.Reader, limit *big.Int) (*big.Int, error) { return rand.Int(rnd, limit) }

func otpSerial(prefix string, n int, rnd io.Reader) (string, error) {
	return otp.Serial(prefix, n, rnd)
}

// randomSerial is prefix + 8 random upper-case letters and digits
// (PI_TOKEN_SERIAL_RANDOM).
func randomSerial(prefix string, rnd io.Reader) (string, error) {
	s, err := otp.Generate(8, "[ABCDEFGHJKLMNPQRSTUVWXYZ0123456789]", rnd)
	return prefix + s, err
}

// RandomBytes reads n random bytes from the service's source.
func (s *Service) RandomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(s.cfg.Rand, b)
	return b, err
}

// RandomString generates a string of length from a contents code
// (privacyIDEA's "cns", "+cn", "[abc]" …).
func (s *Service) RandomString(length int, contents string) (string, error) {
	return otp.Generate(length, contents, s.cfg.Rand)
}
