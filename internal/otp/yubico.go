package otp

import (
	"crypto/aes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Errors of Yubico OTP parsing.
var (
	// ErrModhex is returned for text that is not modhex of whole bytes.
	ErrModhex = errors.New("otp: invalid modhex")
	// ErrYubicoFormat is returned for an OTP that is not public ID + 32
	// modhex characters, or for an AES key that is not 16 bytes.
	ErrYubicoFormat = errors.New("otp: malformed yubico otp")
	// ErrYubicoCRC is returned when the decrypted token fails its CRC: a wrong
	// key or a forged or mistyped OTP.
	ErrYubicoCRC = errors.New("otp: yubico otp crc mismatch")
)

// Lengths of Yubico OTP parts.
const (
	YubicoTokenLength  = 32 // modhex characters of the encrypted block
	YubicoMaxPublicID  = 32 // modhex characters (16 bytes)
	YubicoPrivateIDLen = 6  // bytes
)

const modhexAlphabet = "cbdefghijklnrtuv"

// ModhexEncode encodes b in Yubico's modhex, the keyboard-layout-safe hex.
func ModhexEncode(b []byte) string {
	out := make([]byte, 2*len(b))
	for i, x := range b {
		out[2*i] = modhexAlphabet[x>>4]
		out[2*i+1] = modhexAlphabet[x&0x0f]
	}
	return string(out)
}

// ModhexDecode decodes modhex (either case).
func ModhexDecode(s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("%w: odd length", ErrModhex)
	}
	out := make([]byte, len(s)/2)
	for i := 0; i < len(s); i += 2 {
		hi := strings.IndexByte(modhexAlphabet, lower(s[i]))
		lo := strings.IndexByte(modhexAlphabet, lower(s[i+1]))
		if hi < 0 || lo < 0 {
			return nil, fmt.Errorf("%w: bad character at %d", ErrModhex, i)
		}
		out[i/2] = byte(hi<<4 | lo)
	}
	return out, nil
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// YubicoToken is a decrypted Yubico OTP. PrivateID is secret: compare it with
// MatchPrivateID, and don't log it (String redacts it).
type YubicoToken struct {
	PublicID       string // modhex prefix as typed, lower-case; may be empty
	PrivateID      []byte // 6 bytes, the token's secret UID
	UseCounter     uint16 // non-volatile counter, +1 per power-up
	SessionCounter uint8  // counter within one power-up
	Timestamp      uint32 // 24-bit, 8 Hz, random start per power-up
	Random         uint16
	// Counter is UseCounter<<8 | SessionCounter, which strictly increases
	// per OTP; callers reject a Counter at or below the stored one.
	Counter uint32
}

// MatchPrivateID compares the token's private ID with the stored one in
// constant time.
func (y YubicoToken) MatchPrivateID(id []byte) bool {
	return subtle.ConstantTimeCompare(y.PrivateID, id) == 1
}

// String describes the token without its private ID.
func (y YubicoToken) String() string {
	return fmt.Sprintf("yubico{public_id=%q private_id=REDACTED counter=%d}", y.PublicID, y.Counter)
}

// ParseYubico decrypts a Yubico OTP (public ID + 32 modhex characters) with
// its 16-byte AES key and checks the CRC-16 (ISO 13239, residue 0xf0b8). It
// does not compare the private ID or the counter: that is the caller's state.
func ParseYubico(otp string, aesKey []byte) (YubicoToken, error) {
	if len(aesKey) != 16 {
		return YubicoToken{}, fmt.Errorf("%w: aes key is %d bytes, want 16", ErrYubicoFormat, len(aesKey))
	}
	n := len(otp)
	if n < YubicoTokenLength || n > YubicoTokenLength+YubicoMaxPublicID || n%2 != 0 {
		return YubicoToken{}, fmt.Errorf("%w: length %d", ErrYubicoFormat, n)
	}
	otp = strings.ToLower(otp)
	pub, tok := otp[:n-YubicoTokenLength], otp[n-YubicoTokenLength:]
	if _, err := ModhexDecode(pub); err != nil {
		return YubicoToken{}, fmt.Errorf("%w: public id: %w", ErrYubicoFormat, err)
	}
	ct, err := ModhexDecode(tok)
	if err != nil {
		return YubicoToken{}, fmt.Errorf("%w: token: %w", ErrYubicoFormat, err)
	}
	block, err := aes.NewCipher(aesKey)
	if err != nil {
		return YubicoToken{}, fmt.Errorf("%w: %w", ErrYubicoFormat, err)
	}
	var pt [aes.BlockSize]byte
	block.Decrypt(pt[:], ct) // one block: ECB is the Yubico OTP format
	if crc16(pt[:]) != 0xf0b8 {
		return YubicoToken{}, ErrYubicoCRC
	}
	y := YubicoToken{
		PublicID:       pub,
		PrivateID:      append([]byte(nil), pt[:YubicoPrivateIDLen]...),
		UseCounter:     binary.LittleEndian.Uint16(pt[6:8]),
		Timestamp:      uint32(pt[8]) | uint32(pt[9])<<8 | uint32(pt[10])<<16,
		SessionCounter: pt[11],
		Random:         binary.LittleEndian.Uint16(pt[12:14]),
	}
	y.Counter = uint32(y.UseCounter)<<8 | uint32(y.SessionCounter)
	return y, nil
}

// EncodeYubico is ParseYubico's inverse: the Yubico OTP a key with this
// AES key types for y (public ID, private ID, counters, timestamp and
// random field; Counter is ignored), with the CRC computed. Tests and
// load drivers use it to act as a YubiKey.
func EncodeYubico(y YubicoToken, aesKey []byte) (string, error) {
	if len(y.PrivateID) != YubicoPrivateIDLen {
		return "", fmt.Errorf("%w: private id is %d bytes, want %d", ErrYubicoFormat, len(y.PrivateID), YubicoPrivateIDLen)
	}
	block, err := aes.NewCipher(aesKey)
	if err != nil || len(aesKey) != 16 {
		return "", fmt.Errorf("%w: aes key is %d bytes, want 16", ErrYubicoFormat, len(aesKey))
	}
	if _, err := ModhexDecode(y.PublicID); err != nil {
		return "", fmt.Errorf("%w: public id: %w", ErrYubicoFormat, err)
	}
	var pt [aes.BlockSize]byte
	copy(pt[:6], y.PrivateID)
	binary.LittleEndian.PutUint16(pt[6:8], y.UseCounter)
	pt[8], pt[9], pt[10] = byte(y.Timestamp), byte(y.Timestamp>>8), byte(y.Timestamp>>16)
	pt[11] = y.SessionCounter
	binary.LittleEndian.PutUint16(pt[12:14], y.Random)
	binary.LittleEndian.PutUint16(pt[14:16], ^crc16(pt[:14]))
	var ct [aes.BlockSize]byte
	block.Encrypt(ct[:], pt[:])
	return strings.ToLower(y.PublicID) + ModhexEncode(ct[:]), nil
}

// crc16 is CRC-16/ISO-13239 (X.25 polynomial, reflected, init 0xffff, no
// final xor); over a Yubico block including its stored CRC it yields 0xf0b8.
func crc16(b []byte) uint16 {
	crc := uint16(0xffff)
	for _, x := range b {
		crc ^= uint16(x)
		for range 8 {
			lsb := crc & 1
			crc >>= 1
			if lsb != 0 {
				crc ^= 0x8408
			}
		}
	}
	return crc
}
