package sql

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-crypt/crypt/algorithm/md5crypt"
	"github.com/go-crypt/crypt/algorithm/shacrypt"
	"golang.org/x/crypto/bcrypt"
)

// Why a stored hash was not checked (for the log; never with the hash).
var (
	errHashFormat = errors.New("the stored password hash has an unknown or malformed format")
	errHashCost   = errors.New("the stored password hash's cost is above the limit")
)

// Cost caps: a stored hash above them is not computed (it would hold a
// request for many seconds). They are variables so that tests and fuzzing
// can lower them.
var (
	maxPHPassLog2     = 24         // phpass and Drupal: 2^24 digests
	maxSHACryptRounds = 10_000_000 // $5$ and $6$
	maxBcryptCost     = 16
)

// Costs of written hashes (passlib's defaults, which privacyIDEA uses).
var (
	phpassWriteLog2      = 19
	sha256CryptWriteRnds = 535000
	sha512CryptWriteRnds = 656000
)

// maxPasswordLen bounds the password a check hashes (Drupal's limit).
const maxPasswordLen = 512

// itoa64 is the crypt alphabet of phpass, Drupal and the crypt family.
const itoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

var (
	bcryptRE   = regexp.MustCompile(`^\$2[aby]\$([0-9]{2})\$[./A-Za-z0-9]{53}$`)
	md5cryptRE = regexp.MustCompile(`^\$1\$([^$]{1,8})\$([./A-Za-z0-9]{22})$`)
	shacryptRE = regexp.MustCompile(`^\$([56])\$(?:rounds=([0-9]{1,10})\$)?([^$]*)\$([./A-Za-z0-9]+)$`)
	otrsRE     = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// verifyPassword reports whether password matches the stored hash, in the
// formats privacyIDEA's SQL resolver accepts: a leading "1|" is dropped, a
// leading {scheme} is upper-cased, then phpass ($P$, $H$), Drupal ($S$),
// {SHA}, {SSHA}, {SSHA256}, {SSHA512}, md5-crypt ($1$), bcrypt
// ($2a$, $2b$, $2y$), sha256-crypt ($5$), sha512-crypt ($6$) and OTRS's hex
// SHA-256. An empty password, an unknown format or a hash above the cost
// caps is false; why says which of the last two it was. Digests are
// compared in constant time.
func verifyPassword(stored, password string) (ok bool, why error) {
	if password == "" || len(password) > maxPasswordLen {
		return false, nil
	}
	h := strings.TrimRight(strings.TrimPrefix(stored, "1|"), " ")
	if strings.HasPrefix(h, "{") {
		if end := strings.IndexByte(h, '}'); end > 0 {
			h = strings.ToUpper(h[:end+1]) + h[end+1:]
		}
	}
	switch {
	case strings.HasPrefix(h, "{SHA}"):
		return verifyDigest(sha1.New, h[len("{SHA}"):], password, false)
	case strings.HasPrefix(h, "{SSHA}"):
		return verifyDigest(sha1.New, h[len("{SSHA}"):], password, true)
	case strings.HasPrefix(h, "{SSHA256}"):
		return verifyDigest(sha256.New, h[len("{SSHA256}"):], password, true)
	case strings.HasPrefix(h, "{SSHA512}"):
		return verifyDigest(sha512.New, h[len("{SSHA512}"):], password, true)
	case strings.HasPrefix(h, "$P$"), strings.HasPrefix(h, "$H$"):
		return verifyPHPass(h, password, md5.New, 34)
	case strings.HasPrefix(h, "$S$"):
		return verifyPHPass(h, password, sha512.New, 55)
	case strings.HasPrefix(h, "$1$"):
		return verifyMD5Crypt(h, password)
	case strings.HasPrefix(h, "$2"):
		return verifyBcrypt(h, password)
	case strings.HasPrefix(h, "$5$"), strings.HasPrefix(h, "$6$"):
		return verifySHACrypt(h, password)
	case otrsRE.MatchString(h):
		want, _ := hex.DecodeString(h)
		got := sha256.Sum256([]byte(password))
		return subtle.ConstantTimeCompare(want, got[:]) == 1, nil
	}
	return false, errHashFormat
}

// maxSalt is the longest salt accepted in the {SSHA*} digests.
const maxSalt = 32

// verifyDigest checks an LDAP digest: base64 of H(password+salt)+salt
// (salted) or of H(password).
func verifyDigest(newHash func() hash.Hash, b64, password string, salted bool) (bool, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil {
		return false, errHashFormat
	}
	h := newHash()
	size := h.Size()
	switch {
	case !salted && len(raw) != size,
		salted && (len(raw) <= size || len(raw) > size+maxSalt):
		return false, errHashFormat
	}
	h.Write([]byte(password))
	h.Write(raw[size:])
	return subtle.ConstantTimeCompare(raw[:size], h.Sum(nil)) == 1, nil
}

// verifyPHPass checks phpass ($P$/$H$, MD5, 34 characters) and Drupal 7
// ($S$, SHA-512, cut to 55 characters): the fourth character gives log2
// of the iterations, the next eight are the salt.
func verifyPHPass(stored, password string, newHash func() hash.Hash, length int) (bool, error) {
	if len(stored) != length {
		return false, errHashFormat
	}
	log2 := strings.IndexByte(itoa64, stored[3])
	if log2 < 7 || log2 > 30 {
		return false, errHashFormat
	}
	if log2 > maxPHPassLog2 {
		return false, errHashCost
	}
	got := phpassHash(stored[:12], password, newHash, log2)
	return subtle.ConstantTimeCompare([]byte(stored), []byte(got[:length])) == 1, nil
}

// phpassHash computes setting (id, cost character, 8-character salt)
// followed by the encoded digest: D(salt+password), then 2^log2 times
// D(digest+password).
func phpassHash(setting, password string, newHash func() hash.Hash, log2 int) string {
	h := newHash()
	h.Write([]byte(setting[4:12]))
	h.Write([]byte(password))
	sum := h.Sum(nil)
	for range 1 << log2 {
		h.Reset()
		h.Write(sum)
		h.Write([]byte(password))
		sum = h.Sum(sum[:0])
	}
	return setting + phpassEncode(sum)
}

// phpassEncode is phpass's base64 variant: little-endian groups of three
// bytes, six bits per character of itoa64.
func phpassEncode(src []byte) string {
	var b strings.Builder
	for i := 0; i < len(src); i += 3 {
		v := uint(src[i])
		n := 2
		if i+1 < len(src) {
			v |= uint(src[i+1]) << 8
			n = 3
		}
		if i+2 < len(src) {
			v |= uint(src[i+2]) << 16
			n = 4
		}
		for j := range n {
			b.WriteByte(itoa64[(v>>(6*j))&0x3f])
		}
	}
	return b.String()
}

func verifyMD5Crypt(stored, password string) (bool, error) {
	if !md5cryptRE.MatchString(stored) {
		return false, errHashFormat
	}
	d, err := md5crypt.Decode(stored)
	if err != nil {
		return false, errHashFormat
	}
	return d.Match(password), nil
}

func verifyBcrypt(stored, password string) (bool, error) {
	m := bcryptRE.FindStringSubmatch(stored)
	if m == nil {
		return false, errHashFormat
	}
	cost, _ := strconv.Atoi(m[1])
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return false, errHashFormat
	}
	if cost > maxBcryptCost {
		return false, errHashCost
	}
	return bcrypt.CompareHashAndPassword([]byte(stored), []byte(password)) == nil, nil
}

// verifySHACrypt checks $5$/$6$ as glibc computes them: rounds below 1000
// count as 1000, and only the first 16 salt characters are used.
func verifySHACrypt(stored, password string) (bool, error) {
	m := shacryptRE.FindStringSubmatch(stored)
	if m == nil {
		return false, errHashFormat
	}
	id, roundsText, salt, key := m[1], m[2], m[3], m[4]
	if (id == "5" && len(key) != 43) || (id == "6" && len(key) != 86) {
		return false, errHashFormat
	}
	if len(salt) > 16 {
		salt = salt[:16]
	}
	norm := "$" + id + "$" + salt + "$" + key
	if roundsText != "" {
		rounds, err := strconv.Atoi(roundsText)
		if err != nil || rounds > 999_999_999 {
			return false, errHashFormat
		}
		rounds = max(rounds, 1000)
		if rounds > maxSHACryptRounds {
			return false, errHashCost
		}
		norm = "$" + id + "$rounds=" + strconv.Itoa(rounds) + "$" + salt + "$" + key
	}
	d, err := shacrypt.Decode(norm)
	if err != nil {
		return false, errHashFormat
	}
	return d.Match(password), nil
}

// hashPassword hashes password for storage in the Password_Hash_Type
// kind (see hashTypes).
func hashPassword(kind, password string) (string, error) {
	salted := func(prefix string, newHash func() hash.Hash) string {
		salt := rand.Text()[:16] // 16 random base32 characters, 80 bits
		h := newHash()
		h.Write([]byte(password))
		h.Write([]byte(salt))
		return prefix + base64.StdEncoding.EncodeToString(append(h.Sum(nil), salt...))
	}
	switch kind {
	case "SSHA256":
		return salted("{SSHA256}", sha256.New), nil
	case "SSHA":
		return salted("{SSHA}", sha1.New), nil
	case "SSHA512":
		return salted("{SSHA512}", sha512.New), nil
	case "SHA":
		sum := sha1.Sum([]byte(password))
		return "{SHA}" + base64.StdEncoding.EncodeToString(sum[:]), nil
	case "OTRS":
		sum := sha256.Sum256([]byte(password))
		return hex.EncodeToString(sum[:]), nil
	case "PHPASS":
		salt := make([]byte, 8)
		for i := range salt {
			salt[i] = itoa64[randByte()&0x3f]
		}
		return phpassHash("$P$"+string(itoa64[phpassWriteLog2])+string(salt), password, md5.New, phpassWriteLog2), nil
	case "SHA256CRYPT", "SHA512CRYPT":
		v, rounds := shacrypt.VariantSHA256, sha256CryptWriteRnds
		if kind == "SHA512CRYPT" {
			v, rounds = shacrypt.VariantSHA512, sha512CryptWriteRnds
		}
		h, err := shacrypt.New(shacrypt.WithVariant(v), shacrypt.WithIterations(rounds), shacrypt.WithSaltLength(16))
		if err != nil {
			return "", err
		}
		d, err := h.Hash(password)
		if err != nil {
			return "", err
		}
		return d.Encode(), nil
	case "MD5CRYPT":
		h, err := md5crypt.New(md5crypt.WithVariant(md5crypt.VariantStandard), md5crypt.WithSaltLength(8))
		if err != nil {
			return "", err
		}
		d, err := h.Hash(password)
		if err != nil {
			return "", err
		}
		return d.Encode(), nil
	}
	return "", fmt.Errorf("password hash type %q is not supported", kind)
}

func randByte() byte {
	var b [1]byte
	_, _ = rand.Read(b[:])
	return b[0]
}
