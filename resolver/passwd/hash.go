package passwd

import (
	"strings"

	"github.com/go-crypt/crypt/algorithm/shacrypt"
	"golang.org/x/crypto/bcrypt"
)

// Work limits: a hash asking for more is refused (the check fails), so one
// line of the file cannot make every login attempt take minutes. glibc
// allows up to 999,999,999 rounds and bcrypt cost 31.
const (
	maxSHARounds  = 5_000_000 // about 1.5 s for sha512-crypt here
	minSHARounds  = 1000      // glibc never writes fewer
	maxBcryptCost = 15        // about 2 s
	minBcryptCost = 4
)

// dummyHash is what unknown users, empty passwords and unsupported hash
// fields are checked against, so their timing matches a real check
// (sha512-crypt, 5000 rounds; made with openssl passwd -6).
const dummyHash = "$6$dummysaltdummysa$ly0KGculPEMIByyOtknKbWvS28pV6Iz8DzBw06zu.duN9WaL9yoQiZYCAOO9yVvTSOBTNBpcpZMN7Q7M1GNy71"

type hashKind int

const (
	hashNone hashKind = iota
	hashSHA
	hashBcrypt
)

// verify reports whether password matches hash: sha256-crypt ($5$),
// sha512-crypt ($6$) or bcrypt ($2a$, $2b$, $2y$). Anything else, a shadow
// marker (x, *, !) included, is false. The comparison itself is constant
// time (inside the libraries).
func verify(hash, password string) bool {
	kind := classify(hash)
	if password == "" || kind == hashNone {
		_ = matchSHA(dummyHash, password)
		return false
	}
	if kind == hashBcrypt {
		return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
	}
	return matchSHA(hash, password)
}

func matchSHA(hash, password string) bool {
	d, err := shacrypt.Decode(hash)
	if err != nil {
		return false
	}
	return d.Match(password)
}

// classify checks the exact shape of a supported hash, including the work
// limits, before any library sees it.
func classify(h string) hashKind {
	switch {
	case strings.HasPrefix(h, "$5$"):
		if shaShape(h[3:], 43) {
			return hashSHA
		}
	case strings.HasPrefix(h, "$6$"):
		if shaShape(h[3:], 86) {
			return hashSHA
		}
	case strings.HasPrefix(h, "$2a$"), strings.HasPrefix(h, "$2b$"), strings.HasPrefix(h, "$2y$"):
		if bcryptShape(h[4:]) {
			return hashBcrypt
		}
	}
	return hashNone
}

// shaShape checks "[rounds=N$]salt$key" after the $5$/$6$ prefix: salt of
// 1 to 16 and key of keyLen crypt-base64 characters.
func shaShape(s string, keyLen int) bool {
	if rest, ok := strings.CutPrefix(s, "rounds="); ok {
		num, after, ok := strings.Cut(rest, "$")
		n, valid := parseUID(num) // 1-10 digits
		if !ok || !valid || n < minSHARounds || n > maxSHARounds || num[0] == '0' {
			return false
		}
		s = after
	}
	salt, key, ok := strings.Cut(s, "$")
	return ok && len(salt) >= 1 && len(salt) <= 16 && cryptB64(salt) && len(key) == keyLen && cryptB64(key)
}

// bcryptShape checks "NN$" + 53 characters after the $2x$ prefix.
func bcryptShape(s string) bool {
	if len(s) != 3+53 || s[2] != '$' || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return false
	}
	cost := int(s[0]-'0')*10 + int(s[1]-'0')
	return cost >= minBcryptCost && cost <= maxBcryptCost && cryptB64(s[3:])
}

// cryptB64 reports whether s uses only the crypt alphabet ./0-9A-Za-z.
func cryptB64(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '.' || c == '/' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
