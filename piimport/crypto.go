package piimport

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// The keys of privacyIDEA's encKey file (PI_ENCFILE) that the tables read
// here use, by their slot; slot 2, the value key, encrypts nothing the
// import reads.
const (
	keyToken  = 0 // token seeds (key_enc) and PINs (user_pin)
	keyConfig = 1 // "password" values: config, resolvers, SMTP, RADIUS, tokeninfo
)

// EncKeySize is the size of privacyIDEA's encKey file: three AES-256 keys.
const EncKeySize = 96

// Keys is a parsed encKey. It never prints its bytes: String, GoString and
// Format redact them.
type Keys struct {
	k [3][32]byte
}

// String redacts the keys.
func (*Keys) String() string { return "[encKey redacted]" }

// GoString redacts the keys.
func (k *Keys) GoString() string { return k.String() }

// Format redacts the keys whatever the verb.
func (k *Keys) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// ParseEncKey parses the content of privacyIDEA's encKey file: 96 raw bytes
// (pi-manage create_enckey), the token, config and value keys of 32 bytes
// each. privacyIDEA reads no other form, so neither does ParseEncKey: a hex
// dump of the key and an encKey file encrypted with a password (pi-manage
// encrypt_enckey) are refused with a hint.
func ParseEncKey(b []byte) (*Keys, error) {
	if len(b) != EncKeySize {
		t := strings.Join(strings.Fields(string(b)), "")
		switch {
		case len(t) == 2*EncKeySize && isHex(t):
			return nil, fmt.Errorf("the encKey file holds %d hex digits, privacyIDEA's holds %d raw bytes: convert it with xxd -r -p", len(t), EncKeySize)
		case strings.Count(t, ":") == 1 && isHex(strings.Replace(t, ":", "", 1)):
			return nil, fmt.Errorf("the encKey file is encrypted with a password (pi-manage encrypt_enckey): the import needs the %d raw bytes", EncKeySize)
		default:
			return nil, fmt.Errorf("the encKey file has %d bytes, privacyIDEA's has exactly %d (three AES-256 keys)", len(b), EncKeySize)
		}
	}
	k := &Keys{}
	for i := range k.k {
		copy(k.k[i][:], b[32*i:32*(i+1)])
	}
	return k, nil
}

// errDecrypt is why a value did not decrypt; it never carries the value.
var errDecrypt = errors.New("does not decrypt")

// decryptHex decrypts a value stored as hex cipher text with a separate hex
// IV (token.key_enc/key_iv, token.user_pin/user_pin_iv).
func (k *Keys) decryptHex(slot int, ivHex, cipherHex string) ([]byte, error) {
	iv, err := hex.DecodeString(strings.TrimSpace(ivHex))
	if err != nil {
		return nil, fmt.Errorf("%w: the IV is not hex", errDecrypt)
	}
	ct, err := hex.DecodeString(strings.TrimSpace(cipherHex))
	if err != nil {
		return nil, fmt.Errorf("%w: the cipher text is not hex", errDecrypt)
	}
	return k.decrypt(slot, iv, ct)
}

// decryptPassword decrypts a "password" value: "<iv hex>:<cipher hex>"
// with the config key.
func (k *Keys) decryptPassword(v string) ([]byte, error) {
	ivHex, ctHex, ok := strings.Cut(strings.TrimSpace(v), ":")
	if !ok {
		return nil, fmt.Errorf("%w: not of the form iv:cipher", errDecrypt)
	}
	return k.decryptHex(keyConfig, ivHex, ctHex)
}

// decrypt is AES-256-CBC with privacyIDEA's padding: PKCS#7 since 3.0,
// checked strictly. Values written by older releases (and never written
// again) carry the legacy form: hex of the text, 0x01 0x02, then zero
// bytes up to the block size; it is accepted only in that exact shape.
func (k *Keys) decrypt(slot int, iv, ct []byte) ([]byte, error) {
	if len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("%w: the IV has %d bytes", errDecrypt, len(iv))
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("%w: the cipher text is not a whole number of blocks", errDecrypt)
	}
	c, err := aes.NewCipher(k.k[slot][:])
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(ct))
	cipher.NewCBCDecrypter(c, iv).CryptBlocks(out, ct)
	if p, ok := unpadPKCS7(out); ok {
		return p, nil
	}
	if p, ok := unpadLegacy(out); ok {
		return p, nil
	}
	clear(out)
	return nil, fmt.Errorf("%w: bad padding", errDecrypt)
}

// unpadPKCS7 removes PKCS#7 padding, checking every padding byte.
func unpadPKCS7(b []byte) ([]byte, bool) {
	n := int(b[len(b)-1])
	if n == 0 || n > aes.BlockSize || n > len(b) {
		return nil, false
	}
	for _, c := range b[len(b)-n:] {
		if int(c) != n {
			return nil, false
		}
	}
	return b[:len(b)-n], true
}

// unpadLegacy undoes the padding of privacyIDEA before 3.0:
// hex(text) 0x01 0x02 0x00{0,15}.
func unpadLegacy(b []byte) ([]byte, bool) {
	t := bytes.TrimRight(b, "\x00")
	if len(b)-len(t) >= aes.BlockSize {
		return nil, false
	}
	h, ok := bytes.CutSuffix(t, []byte{0x01, 0x02})
	if !ok || len(h)%2 != 0 {
		return nil, false
	}
	out := make([]byte, len(h)/2)
	if _, err := hex.Decode(out, h); err != nil {
		return nil, false
	}
	return out, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
