package caconnector

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"io"
	"math/big"
	"unicode/utf16"
)

// PKCS#12 (RFC 7292) is written here because the Go standard library and
// golang.org/x/crypto only read it (and only its legacy ciphers). The file
// uses the modern algorithms OpenSSL 3 writes by default: the private key
// in a PKCS#8 shrouded key bag encrypted with PBES2 (PBKDF2 with
// HMAC-SHA-256, AES-256-CBC), the certificate in a certificate bag, and
// an HMAC-SHA-256 integrity MAC keyed with the PKCS#12 key derivation.

// pkcs12Iterations is the iteration count of PBKDF2 and of the MAC key
// derivation.
const pkcs12Iterations = 100000

var (
	oidData              = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidCertBag           = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 3}
	oidShroudedKeyBag    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidX509Certificate   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 22, 1}
	oidFriendlyName      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 20}
	oidLocalKeyID        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 21}
	oidPBES2             = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2            = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACWithSHA256    = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidAES256CBC         = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidSHA256            = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	asn1Null             = asn1.RawValue{Tag: asn1.TagNull}
	pkcs12FriendlyName   = "certificatetoken"
	errPKCS12KeyType     = errors.New("caconnector: PKCS#12: unsupported private key")
	errPKCS12EmptySecret = errors.New("caconnector: PKCS#12: the password is empty")
)

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue // explicit [0]
}

type safeBag struct {
	ID         asn1.ObjectIdentifier
	Value      asn1.RawValue     // explicit [0]
	Attributes []pkcs12Attribute `asn1:"set,optional"`
}

type pkcs12Attribute struct {
	ID    asn1.ObjectIdentifier
	Value asn1.RawValue `asn1:"set"`
}

type certBag struct {
	ID   asn1.ObjectIdentifier
	Data []byte `asn1:"tag:0,explicit"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Data      []byte
}

type pbes2Params struct {
	KDF        pkix.AlgorithmIdentifier
	Encryption pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	PRF        pkix.AlgorithmIdentifier
}

type digestInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Digest    []byte
}

type macData struct {
	Mac        digestInfo
	MacSalt    []byte
	Iterations int
}

type pfx struct {
	Version  int
	AuthSafe contentInfo
	MacData  macData
}

// EncodePKCS12 returns a PKCS#12 file holding key and cert, encrypted and
// integrity-protected with password (see the comment above).
func EncodePKCS12(rnd io.Reader, key crypto.PrivateKey, cert *x509.Certificate, password string) ([]byte, error) {
	if password == "" {
		return nil, errPKCS12EmptySecret
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, errPKCS12KeyType
	}
	idSum := sha1.Sum(cert.Raw)
	attrs, err := bagAttributes(idSum[:])
	if err != nil {
		return nil, err
	}

	// The certificate bag.
	cb, err := asn1.Marshal(certBag{ID: oidX509Certificate, Data: cert.Raw})
	if err != nil {
		return nil, err
	}
	certContents, err := asn1.Marshal([]safeBag{{ID: oidCertBag, Value: explicit0(cb), Attributes: attrs}})
	if err != nil {
		return nil, err
	}

	// The shrouded key bag.
	salt := make([]byte, 16)
	iv := make([]byte, aes.BlockSize)
	if _, err := io.ReadFull(rnd, salt); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(rnd, iv); err != nil {
		return nil, err
	}
	dk, err := pbkdf2.Key(sha256.New, password, salt, pkcs12Iterations, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(dk)
	if err != nil {
		return nil, err
	}
	pad := aes.BlockSize - len(p8)%aes.BlockSize
	plain := append(append([]byte{}, p8...), make([]byte, pad)...)
	for i := len(p8); i < len(plain); i++ {
		plain[i] = byte(pad)
	}
	enc := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(enc, plain)
	kdfParams, err := asn1.Marshal(pbkdf2Params{Salt: salt, Iterations: pkcs12Iterations,
		PRF: pkix.AlgorithmIdentifier{Algorithm: oidHMACWithSHA256, Parameters: asn1Null}})
	if err != nil {
		return nil, err
	}
	ivDER, err := asn1.Marshal(iv)
	if err != nil {
		return nil, err
	}
	pbes2, err := asn1.Marshal(pbes2Params{
		KDF:        pkix.AlgorithmIdentifier{Algorithm: oidPBKDF2, Parameters: asn1.RawValue{FullBytes: kdfParams}},
		Encryption: pkix.AlgorithmIdentifier{Algorithm: oidAES256CBC, Parameters: asn1.RawValue{FullBytes: ivDER}},
	})
	if err != nil {
		return nil, err
	}
	epki, err := asn1.Marshal(encryptedPrivateKeyInfo{
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidPBES2, Parameters: asn1.RawValue{FullBytes: pbes2}},
		Data:      enc,
	})
	if err != nil {
		return nil, err
	}
	keyContents, err := asn1.Marshal([]safeBag{{ID: oidShroudedKeyBag, Value: explicit0(epki), Attributes: attrs}})
	if err != nil {
		return nil, err
	}

	// The authenticated safe: two data content infos.
	var safe []contentInfo
	for _, c := range [][]byte{certContents, keyContents} {
		ci, err := dataContent(c)
		if err != nil {
			return nil, err
		}
		safe = append(safe, ci)
	}
	authSafe, err := asn1.Marshal(safe)
	if err != nil {
		return nil, err
	}
	outer, err := dataContent(authSafe)
	if err != nil {
		return nil, err
	}

	// The MAC over the authenticated safe's octets.
	macSalt := make([]byte, 16)
	if _, err := io.ReadFull(rnd, macSalt); err != nil {
		return nil, err
	}
	macKey := pkcs12KDF(bmpPassword(password), macSalt, pkcs12Iterations, 3, 32)
	h := hmac.New(sha256.New, macKey)
	h.Write(authSafe)
	return asn1.Marshal(pfx{
		Version:  3,
		AuthSafe: outer,
		MacData: macData{
			Mac:        digestInfo{Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidSHA256, Parameters: asn1Null}, Digest: h.Sum(nil)},
			MacSalt:    macSalt,
			Iterations: pkcs12Iterations,
		},
	})
}

// explicit0 is der as the content of an explicit [0] tag (a RawValue
// field of encoding/asn1 ignores its field's tag).
func explicit0(der []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: der}
}

// dataContent wraps b as a ContentInfo of type data.
func dataContent(b []byte) (contentInfo, error) {
	oct, err := asn1.Marshal(b)
	if err != nil {
		return contentInfo{}, err
	}
	return contentInfo{ContentType: oidData, Content: explicit0(oct)}, nil
}

// bagAttributes are the friendly name and the local key id both bags
// carry, so that readers pair the key with its certificate.
func bagAttributes(id []byte) ([]pkcs12Attribute, error) {
	idDER, err := asn1.Marshal(id)
	if err != nil {
		return nil, err
	}
	name := bmpString(pkcs12FriendlyName)
	nameDER, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: 30, Bytes: name})
	if err != nil {
		return nil, err
	}
	return []pkcs12Attribute{
		{ID: oidFriendlyName, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: nameDER}},
		{ID: oidLocalKeyID, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: idDER}},
	}, nil
}

func bmpString(s string) []byte {
	var out []byte
	for _, r := range utf16.Encode([]rune(s)) {
		out = append(out, byte(r>>8), byte(r))
	}
	return out
}

// bmpPassword is the password as the PKCS#12 key derivation takes it:
// UTF-16BE with a terminating zero character.
func bmpPassword(s string) []byte { return append(bmpString(s), 0, 0) }

// pkcs12KDF is the key derivation of RFC 7292 appendix B.2 with SHA-256
// (u = 32, v = 64): id 1 for keys, 2 for IVs, 3 for MAC keys.
func pkcs12KDF(password, salt []byte, iterations int, id byte, n int) []byte {
	const v = 64 // SHA-256's block size
	fill := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		out := make([]byte, v*((len(b)+v-1)/v))
		for i := range out {
			out[i] = b[i%len(b)]
		}
		return out
	}
	d := make([]byte, v)
	for i := range d {
		d[i] = id
	}
	I := append(fill(salt), fill(password)...)
	var out []byte
	one := big.NewInt(1)
	mod := new(big.Int).Lsh(one, v*8)
	for len(out) < n {
		h := sha256.New()
		h.Write(d)
		h.Write(I)
		a := h.Sum(nil)
		for j := 1; j < iterations; j++ {
			s := sha256.Sum256(a)
			a = s[:]
		}
		out = append(out, a...)
		if len(out) >= n {
			break
		}
		b := new(big.Int).SetBytes(fill(a)[:v])
		b.Add(b, one)
		for j := 0; j < len(I); j += v {
			ij := new(big.Int).SetBytes(I[j : j+v])
			ij.Add(ij, b)
			ij.Mod(ij, mod)
			blk := ij.Bytes()
			clear(I[j : j+v])
			copy(I[j+v-len(blk):j+v], blk)
		}
	}
	return out[:n]
}
