package tokenfile

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Failure reasons for keys; they name the problem, never a value.
const (
	reasonNoKey     = "key is encrypted but no preshared key or password was given"
	reasonUndecrypt = "cannot be decrypted (wrong preshared key or password, or corrupt data)"
)

// keyCache holds the document's encryption and MAC keys, derived once on
// first use: PBKDF2 is deliberately slow, and a plain-value document never
// needs a key at all.
type keyCache struct {
	encDone   bool
	enc       []byte
	encReason string

	macDone   bool
	mac       []byte
	macHash   func() hash.Hash
	macReason string
	macOut    outcome
}

// encryptionKey returns the key that decrypts the document's secrets, or a
// Failure reason: the password when the document derives its key from one,
// else the preshared key.
func (p *pskcParser) encryptionKey() ([]byte, string) {
	c := &p.keys
	if c.encDone {
		return c.enc, c.encReason
	}
	c.encDone = true
	var dk *xDerivedKey
	if p.doc.encKey != nil {
		dk = p.doc.encKey.DerivedKey
	}
	switch psk := p.opt.PresharedKey; {
	case dk != nil && p.opt.Password != "":
		c.enc, c.encReason = derive(dk, p.opt.Password)
	case psk != nil:
		if aesKeyLen(len(psk)) {
			c.enc = psk
		} else {
			c.encReason = "the preshared key must be 16, 24 or 32 bytes"
		}
	case p.opt.Password != "":
		c.encReason = "a password was given but the document has no DerivedKey"
	default:
		c.encReason = reasonNoKey
	}
	return c.enc, c.encReason
}

func aesKeyLen(n int) bool { return n == 16 || n == 24 || n == 32 }

// derive computes a PBKDF2 DerivedKey (RFC 6030 §6.2, PKCS #5 v2.0).
func derive(dk *xDerivedKey, password string) ([]byte, string) {
	m := dk.Method
	if !strings.HasSuffix(lowerTrim(m.Algorithm), "pbkdf2") {
		return nil, "unsupported key derivation method " + quote(strings.TrimSpace(m.Algorithm)) + " (want PBKDF2)"
	}
	pp := m.Params
	if pp == nil {
		return nil, "DerivedKey has no PBKDF2-params"
	}
	if pp.Salt == nil {
		return nil, "PBKDF2 salt is missing"
	}
	salt, err := decodeBase64(*pp.Salt)
	if err != nil {
		return nil, "PBKDF2 salt is not base64"
	}
	iter, err := strconv.Atoi(strings.TrimSpace(pp.IterationCount))
	if err != nil || iter < 1 || iter > maxIterations {
		return nil, fmt.Sprintf("PBKDF2 iteration count must be 1 to %d", maxIterations)
	}
	keyLen := 16
	if s := strings.TrimSpace(pp.KeyLength); s != "" {
		keyLen, err = strconv.Atoi(s)
		if err != nil || !aesKeyLen(keyLen) {
			return nil, "PBKDF2 key length must be 16, 24 or 32"
		}
	}
	prf := sha1.New
	if pp.PRF != nil && strings.TrimSpace(pp.PRF.Algorithm) != "" {
		if prf = hmacHash(pp.PRF.Algorithm); prf == nil {
			return nil, "unsupported PBKDF2 PRF " + quote(strings.TrimSpace(pp.PRF.Algorithm))
		}
	}
	key, err := pbkdf2.Key(prf, password, salt, iter, keyLen)
	if err != nil {
		return nil, "PBKDF2 key derivation failed"
	}
	return key, ""
}

// hmacHash maps an xmldsig or xmldsig-more HMAC URI ("...#hmac-sha256") to
// its hash, or nil.
func hmacHash(uri string) func() hash.Hash {
	name := lowerTrim(uri)
	if i := strings.LastIndexByte(name, '#'); i >= 0 {
		name = name[i+1:]
	}
	switch name {
	case "hmac-sha1":
		return sha1.New
	case "hmac-sha224":
		return sha256.New224
	case "hmac-sha256":
		return sha256.New
	case "hmac-sha384":
		return sha512.New384
	case "hmac-sha512":
		return sha512.New
	}
	return nil
}

// macKey returns the document's MAC key and hash, or a reason and outcome.
func (p *pskcParser) macKey() ([]byte, func() hash.Hash, string, outcome) {
	c := &p.keys
	if c.macDone {
		return c.mac, c.macHash, c.macReason, c.macOut
	}
	c.macDone = true
	mm := p.doc.mac
	if c.macHash = hmacHash(mm.Algorithm); c.macHash == nil {
		c.macReason, c.macOut = "unsupported MAC algorithm "+quote(strings.TrimSpace(mm.Algorithm)), macFailure
		return nil, nil, c.macReason, c.macOut
	}
	enc, reason := p.encryptionKey()
	if reason != "" {
		c.macReason, c.macOut = reason, failed
		return nil, nil, c.macReason, c.macOut
	}
	if mm.MACKey == nil {
		// Drafts of RFC 6030 MACed with the encryption key itself.
		c.mac = enc
		return c.mac, c.macHash, "", fine
	}
	ct, err := decodeBase64(mm.MACKey.CipherValue)
	if err != nil {
		c.macReason, c.macOut = "MAC key CipherValue is not base64", macFailure
		return nil, nil, c.macReason, c.macOut
	}
	key, reason, out := decryptCBC(mm.MACKey.Method.Algorithm, enc, ct)
	switch out {
	case fine:
		c.mac = key
	case undecrypt:
		c.macReason, c.macOut = "MAC key "+reason, undecrypt
	default:
		c.macReason, c.macOut = "MAC key "+reason, macFailure
	}
	return c.mac, c.macHash, c.macReason, c.macOut
}

// secret checks the MAC of an encrypted secret and decrypts it.
func (p *pskcParser) secret(v *xValue) ([]byte, string, outcome) {
	ev := v.EncryptedValue
	ct, err := decodeBase64(ev.CipherValue)
	if err != nil {
		return nil, "Secret CipherValue is not base64", failed
	}
	key, reason := p.encryptionKey()
	if reason != "" {
		return nil, reason, failed
	}
	if p.doc.mac != nil && p.mode != MACNoCheck {
		if reason, out := p.checkMAC(v, ct); out != fine {
			return nil, reason, out
		}
	}
	plain, reason, out := decryptCBC(ev.Method.Algorithm, key, ct)
	if out != fine {
		return nil, "Secret " + reason, out
	}
	return plain, "", fine
}

// checkMAC verifies ValueMAC = HMAC(MAC key, CipherValue with IV). A
// macFailure reason starts with "MAC check failed" so that it reads well as a
// Failure; run builds the whole-file error from it.
func (p *pskcParser) checkMAC(v *xValue, ct []byte) (string, outcome) {
	mk, h, reason, out := p.macKey()
	switch out {
	case fine:
	case macFailure:
		return "MAC check failed: " + reason, out
	default:
		return reason, out
	}
	if v.ValueMAC == nil {
		return "MAC check failed: the Secret has no ValueMAC", macFailure
	}
	want, err := decodeBase64(*v.ValueMAC)
	if err != nil {
		return "MAC check failed: ValueMAC is not base64", macFailure
	}
	m := hmac.New(h, mk)
	m.Write(ct)
	if !hmac.Equal(m.Sum(nil), want) {
		return "MAC check failed: the ValueMAC does not match", macFailure
	}
	return "", fine
}

// decryptCBC decrypts xmlenc AES-CBC: the IV is the first block of ct, the
// plaintext has PKCS#7 padding, checked strictly. A bad padding is the usual
// sign of a wrong key and yields undecrypt; structural problems yield failed.
func decryptCBC(alg string, key, ct []byte) ([]byte, string, outcome) {
	var want int
	a := lowerTrim(alg)
	if i := strings.LastIndexByte(a, '#'); i >= 0 {
		a = a[i+1:]
	}
	switch a {
	case "aes128-cbc":
		want = 16
	case "aes192-cbc":
		want = 24
	case "aes256-cbc":
		want = 32
	default:
		return nil, "uses the unsupported encryption algorithm " + quote(strings.TrimSpace(alg)), failed
	}
	if len(key) != want {
		return nil, fmt.Sprintf("needs a %d-byte key for %s, but the key has %d bytes", want, a, len(key)), failed
	}
	if len(ct) < 2*aes.BlockSize || len(ct)%aes.BlockSize != 0 {
		return nil, "ciphertext has an invalid length", failed
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, "cannot be decrypted", failed
	}
	out := make([]byte, len(ct)-aes.BlockSize)
	cipher.NewCBCDecrypter(block, ct[:aes.BlockSize]).CryptBlocks(out, ct[aes.BlockSize:])
	n := int(out[len(out)-1])
	bad := n == 0 || n > aes.BlockSize
	if !bad {
		for _, b := range out[len(out)-n:] {
			bad = bad || int(b) != n
		}
	}
	if bad {
		clear(out)
		return nil, reasonUndecrypt, undecrypt
	}
	return out[:len(out)-n], "", fine
}

// decodeBase64 decodes base64 that XML may have wrapped over several lines.
func decodeBase64(s string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
}
