package tokenfile_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/tokenfile"
)

// rfcSeed is the RFC 4226 test seed, which RFC 6030's examples carry too.
var rfcSeed = []byte("12345678901234567890")

// rfcPSK is the preshared key of RFC 6030 §6.1.
var rfcPSK = mustHex("12345678901234567890123456789012")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// encryptCBC is the test side of xmlenc aes-cbc: iv || AES-CBC(PKCS#7(plain)).
func encryptCBC(t testing.TB, key, iv, plain []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	n := aes.BlockSize - len(plain)%aes.BlockSize
	padded := append(bytes.Clone(plain), bytes.Repeat([]byte{byte(n)}, n)...)
	out := append(bytes.Clone(iv), make([]byte, len(padded))...)
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(out[aes.BlockSize:], padded)
	return out
}

// encryptRaw encrypts already padded (or deliberately badly padded) plain.
func encryptRaw(t testing.TB, key, iv, plain []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(iv), make([]byte, len(plain))...)
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(out[aes.BlockSize:], plain)
	return out
}

func hmacSHA1(key, data []byte) []byte {
	m := hmac.New(sha1.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

// derivePBKDF2 derives a test document's key; prf is "" (SHA-1) or an
// hmac-sha256 URI.
func derivePBKDF2(t testing.TB, prf, password string, salt []byte, iter, keyLen int) []byte {
	t.Helper()
	h := sha1.New
	if strings.HasSuffix(prf, "sha256") {
		h = sha256.New
	}
	key, err := pbkdf2.Key(h, password, salt, iter, keyLen)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// iv returns a fixed, distinct IV per n, so that documents are reproducible.
func iv(n byte) []byte { return bytes.Repeat([]byte{n}, aes.BlockSize) }

const (
	nsPSKC    = "urn:ietf:params:xml:ns:keyprov:pskc"
	algHOTP   = "urn:ietf:params:xml:ns:keyprov:pskc:hotp"
	algTOTP   = "urn:ietf:params:xml:ns:keyprov:pskc:totp"
	aes128    = "http://www.w3.org/2001/04/xmlenc#aes128-cbc"
	uriSHA1   = "http://www.w3.org/2000/09/xmldsig#hmac-sha1"
	uriPBKDF2 = "http://www.rsasecurity.com/rsalabs/pkcs/schemas/pkcs-5v2-0#pbkdf2"
)

// xKey describes one KeyPackage of a test document.
type xKey struct {
	Serial    string // DeviceInfo/SerialNo; none when ""
	ID        string // Key@Id
	Algorithm string // default algHOTP
	Length    string // ResponseFormat Length; none when ""
	Counter   string // none when ""
	Interval  string // TimeInterval; none when ""
	Plain     []byte // PlainValue secret
	Cipher    []byte // EncryptedValue CipherValue (IV included)
	EncAlg    string // default aes128
	MAC       []byte // ValueMAC; none when nil
	RawSecret string // replaces the whole <Secret> content when set
}

// xDoc describes a test PSKC document.
type xDoc struct {
	EncryptionKey string // raw inner XML of <EncryptionKey>; none when ""
	MACAlg        string // MACMethod Algorithm; no MACMethod when ""
	MACKey        []byte // MACKey CipherValue; no MACKey when nil
	Keys          []xKey
}

func (d xDoc) bytes() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<KeyContainer Version="1.0" xmlns="%s" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" xmlns:xenc="http://www.w3.org/2001/04/xmlenc#"
  xmlns:xenc11="http://www.w3.org/2009/xmlenc11#" xmlns:pkcs5="http://www.rsasecurity.com/rsalabs/pkcs/schemas/pkcs-5v2-0#">
`, nsPSKC)
	if d.EncryptionKey != "" {
		fmt.Fprintf(&b, "  <EncryptionKey>%s</EncryptionKey>\n", d.EncryptionKey)
	}
	if d.MACAlg != "" {
		fmt.Fprintf(&b, "  <MACMethod Algorithm=%q>", d.MACAlg)
		if d.MACKey != nil {
			fmt.Fprintf(&b, `<MACKey><xenc:EncryptionMethod Algorithm=%q/><xenc:CipherData><xenc:CipherValue>%s</xenc:CipherValue></xenc:CipherData></MACKey>`, aes128, b64(d.MACKey))
		}
		b.WriteString("</MACMethod>\n")
	}
	for _, k := range d.Keys {
		b.WriteString("  <KeyPackage>\n")
		if k.Serial != "" {
			fmt.Fprintf(&b, "    <DeviceInfo><Manufacturer>Manufacturer</Manufacturer><SerialNo>%s</SerialNo></DeviceInfo>\n", k.Serial)
		}
		alg := k.Algorithm
		if alg == "" {
			alg = algHOTP
		}
		fmt.Fprintf(&b, "    <Key Id=%q Algorithm=%q>\n      <Issuer>Issuer</Issuer>\n", k.ID, alg)
		if k.Length != "" {
			fmt.Fprintf(&b, "      <AlgorithmParameters><ResponseFormat Length=%q Encoding=\"DECIMAL\"/></AlgorithmParameters>\n", k.Length)
		}
		b.WriteString("      <Data>\n        <Secret>")
		switch {
		case k.RawSecret != "":
			b.WriteString(k.RawSecret)
		case k.Cipher != nil:
			enc := k.EncAlg
			if enc == "" {
				enc = aes128
			}
			fmt.Fprintf(&b, "<EncryptedValue><xenc:EncryptionMethod Algorithm=%q/><xenc:CipherData><xenc:CipherValue>%s</xenc:CipherValue></xenc:CipherData></EncryptedValue>", enc, b64(k.Cipher))
		case k.Plain != nil:
			fmt.Fprintf(&b, "<PlainValue>%s</PlainValue>", b64(k.Plain))
		}
		if k.MAC != nil {
			fmt.Fprintf(&b, "<ValueMAC>%s</ValueMAC>", b64(k.MAC))
		}
		b.WriteString("</Secret>\n")
		if k.Counter != "" {
			fmt.Fprintf(&b, "        <Counter><PlainValue>%s</PlainValue></Counter>\n", k.Counter)
		}
		if k.Interval != "" {
			fmt.Fprintf(&b, "        <TimeInterval><PlainValue>%s</PlainValue></TimeInterval>\n", k.Interval)
		}
		b.WriteString("      </Data>\n    </Key>\n  </KeyPackage>\n")
	}
	b.WriteString("</KeyContainer>\n")
	return []byte(b.String())
}

// pskKeyName is the EncryptionKey of a preshared-key document.
const pskKeyName = "<ds:KeyName>Pre-shared-key</ds:KeyName>"

// encryptedKey returns a key whose secret seed is encrypted under encKey and
// MACed under macKey (no ValueMAC when macKey is nil).
func encryptedKey(t testing.TB, serial string, seed, encKey, macKey []byte, n byte) xKey {
	t.Helper()
	ct := encryptCBC(t, encKey, iv(n), seed)
	k := xKey{Serial: serial, ID: "id" + serial, Length: "6", Counter: "0", Cipher: ct}
	if macKey != nil {
		k.MAC = hmacSHA1(macKey, ct)
	}
	return k
}

// pbkdf2Key is an EncryptionKey deriving the key from a password.
func pbkdf2Key(salt []byte, iterations, keyLen int, prf string) string {
	prfXML := "<PRF/>"
	if prf != "" {
		prfXML = fmt.Sprintf("<PRF Algorithm=%q/>", prf)
	}
	return fmt.Sprintf(`<xenc11:DerivedKey><xenc11:KeyDerivationMethod Algorithm=%q><pkcs5:PBKDF2-params>`+
		`<Salt><Specified>%s</Specified></Salt><IterationCount>%d</IterationCount><KeyLength>%d</KeyLength>%s`+
		`</pkcs5:PBKDF2-params></xenc11:KeyDerivationMethod><xenc11:MasterKeyName>My Password 1</xenc11:MasterKeyName></xenc11:DerivedKey>`,
		uriPBKDF2, b64(salt), iterations, keyLen, prfXML)
}

// wantWrapped fails unless err wraps target.
func wantWrapped(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

// noSecrets fails when a message shows one of the secrets in any common
// spelling.
func noSecrets(t *testing.T, recs []tokenfile.Record, fails []tokenfile.Failure, err error, secrets ...[]byte) {
	t.Helper()
	var texts []string
	for _, f := range fails {
		texts = append(texts, f.Reason, f.Serial)
	}
	for _, r := range recs {
		texts = append(texts, r.String(), fmt.Sprintf("%v %+v %#v", r, r, r))
	}
	if err != nil {
		texts = append(texts, err.Error())
	}
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		for _, enc := range []string{string(s), hex.EncodeToString(s), strings.ToUpper(hex.EncodeToString(s)), b64(s)} {
			for _, txt := range texts {
				if strings.Contains(txt, enc) {
					t.Errorf("message %q shows a secret", txt)
				}
			}
		}
	}
}

// failureFor returns the failure for serial, or fails the test.
func failureFor(t *testing.T, fails []tokenfile.Failure, serial string) tokenfile.Failure {
	t.Helper()
	for _, f := range fails {
		if f.Serial == serial {
			return f
		}
	}
	t.Fatalf("no failure for %q in %+v", serial, fails)
	return tokenfile.Failure{}
}

// recordFor returns the record for serial, or fails the test.
func recordFor(t *testing.T, recs []tokenfile.Record, serial string) tokenfile.Record {
	t.Helper()
	for _, r := range recs {
		if r.Serial == serial {
			return r
		}
	}
	t.Fatalf("no record for %q in %v", serial, recs)
	return tokenfile.Record{}
}
