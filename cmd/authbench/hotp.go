package main

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/binary"
	"hash"
)

// otpDigits is the OTP length of the enrolled tokens (the server default).
const otpDigits = 6

// hotpGen computes RFC 4226 HOTP values (HMAC-SHA-1) for one key. It
// keeps its HMAC state between calls, so it belongs to one goroutine.
type hotpGen struct {
	mac    hash.Hash
	digits int
	sum    []byte
}

// newHOTP returns a generator of digits-long values (6 to 9) for key.
func newHOTP(key []byte, digits int) *hotpGen {
	if digits < 6 || digits > 9 {
		panic("authbench: HOTP digits must be 6 to 9")
	}
	return &hotpGen{mac: hmac.New(sha1.New, key), digits: digits, sum: make([]byte, 0, sha1.Size)}
}

// At returns the value for counter, zero-padded to the generator's length.
func (g *hotpGen) At(counter uint64) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	g.mac.Reset()
	g.mac.Write(msg[:])
	g.sum = g.mac.Sum(g.sum[:0])
	// Dynamic truncation (RFC 4226 §5.3).
	off := g.sum[len(g.sum)-1] & 0x0f
	code := binary.BigEndian.Uint32(g.sum[off:off+4]) & 0x7fffffff
	var buf [9]byte
	for i := g.digits - 1; i >= 0; i-- {
		buf[i] = byte('0' + code%10)
		code /= 10
	}
	return string(buf[:g.digits])
}
