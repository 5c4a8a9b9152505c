package secret

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is wrapped by every error about a hash string that cannot be
// read or that this package cannot verify (argon2d, version 0x10). The
// wrapping error names the problem but never repeats the string.
var ErrMalformed = errors.New("secret: malformed password hash")

const (
	variantID = "argon2id"
	variantI  = "argon2i"

	version10 = 0x10
	version13 = 0x13

	// Structural bounds of a PHC string, far above anything real; the
	// configurable Caps apply on top of them in Verify.
	maxPHCLen  = 2048
	minSaltLen = 8 // RFC 9106 minimum
	maxSaltLen = 256
	minHashLen = 4 // RFC 9106 minimum
	maxHashLen = 1024
)

// Params are the Argon2 cost parameters of a hash. Memory is in KiB.
type Params struct {
	Time    uint32
	Memory  uint32 // KiB
	Threads uint8
	KeyLen  uint32
	SaltLen uint32
}

// DefaultParams are the parameters of new hashes: OWASP's Argon2id minimum
// (19 MiB, t=2, p=1), about 56 ms here, so the PIN check does not dominate
// a request as privacyIDEA's t=9 hashes do.
var DefaultParams = Params{Time: 2, Memory: 19 * 1024, Threads: 1, KeyLen: 32, SaltLen: 16}

// PHC is a decoded Argon2 hash string.
type PHC struct {
	Variant string // "argon2id" or "argon2i"
	Version int    // 0x13 (19), or 0x10 (16) when the string has no v=
	Params  Params // KeyLen and SaltLen are len(Hash) and len(Salt)
	Salt    []byte
	Hash    []byte
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// ParsePHC decodes an Argon2 hash in the PHC string format as written by
// argon2-cffi, passlib and [Hasher.Hash]:
//
//	$argon2id$v=19$m=65536,t=9,p=4$<salt>$<hash>
//
// Salt and hash are standard base64, without padding or with it. A missing
// v= means version 0x10, as in the reference implementation. Parsing is
// strict and bounded (the parameters in this order, decimal without sign or
// leading zeros, m at least 8*p), and every error wraps [ErrMalformed].
// argon2d is refused because golang.org/x/crypto does not implement it.
func ParsePHC(s string) (PHC, error) {
	var p PHC
	if len(s) > maxPHCLen {
		return p, malformed("longer than %d bytes", maxPHCLen)
	}
	if !strings.HasPrefix(s, "$") {
		return p, malformed("does not start with $")
	}
	f := strings.Split(s[1:], "$")
	switch f[0] {
	case variantID, variantI:
		p.Variant = f[0]
	case "argon2d":
		return p, malformed("argon2d is not supported (golang.org/x/crypto implements only argon2id and argon2i)")
	default:
		return p, malformed("not an argon2id or argon2i hash")
	}
	f = f[1:]
	switch len(f) {
	case 4:
		v, ok := strings.CutPrefix(f[0], "v=")
		if !ok {
			return p, malformed("second field is not v=<version>")
		}
		n, err := parseDecimal(v, 32)
		if err != nil {
			return p, malformed("version: %v", err)
		}
		if n != version10 && n != version13 {
			return p, malformed("unknown argon2 version %d (want 19, or 16)", n)
		}
		p.Version = int(n)
		f = f[1:]
	case 3:
		if !strings.HasPrefix(f[0], "v=") { // else a field is missing
			p.Version = version10
			break
		}
		fallthrough
	default:
		return p, malformed("want $%s$v=<version>$m=<KiB>,t=<time>,p=<threads>$<salt>$<hash>", p.Variant)
	}

	params, err := parseParams(f[0])
	if err != nil {
		return p, err
	}
	if p.Salt, err = decodeB64(f[1], minSaltLen, maxSaltLen); err != nil {
		return p, malformed("salt: %v", err)
	}
	if p.Hash, err = decodeB64(f[2], minHashLen, maxHashLen); err != nil {
		return p, malformed("hash: %v", err)
	}
	params.SaltLen = uint32(len(p.Salt))
	params.KeyLen = uint32(len(p.Hash))
	p.Params = params
	return p, nil
}

// parseParams reads "m=<KiB>,t=<time>,p=<threads>", in this order only.
func parseParams(s string) (Params, error) {
	var params Params
	kv := strings.Split(s, ",")
	if len(kv) != 3 {
		return params, malformed("parameters: want exactly m=<KiB>,t=<time>,p=<threads>")
	}
	var vals [3]uint64
	for i, key := range [3]string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(kv[i], key+"=")
		if !ok {
			return params, malformed("parameters: want exactly m=<KiB>,t=<time>,p=<threads>")
		}
		bits := 32
		if key == "p" {
			bits = 8 // x/crypto's limit; RFC 9106 allows up to 2^24-1
		}
		n, err := parseDecimal(v, bits)
		if err != nil {
			return params, malformed("parameter %s: %v", key, err)
		}
		if n == 0 {
			return params, malformed("parameter %s is zero", key)
		}
		vals[i] = n
	}
	params.Memory = uint32(vals[0])
	params.Time = uint32(vals[1])
	params.Threads = uint8(vals[2])
	if uint64(params.Memory) < 8*uint64(params.Threads) {
		return params, malformed("parameter m is below 8*p")
	}
	return params, nil
}

// parseDecimal accepts only ASCII digits, without sign or leading zeros,
// that fit in bits.
func parseDecimal(s string, bits int) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	if len(s) > 10 {
		return 0, errors.New("number too long")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a decimal number")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero")
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("number out of range (max %d)", uint64(1)<<bits-1)
	}
	return n, nil
}

// decodeB64 decodes standard base64 with or without padding. Characters
// outside the alphabet, newlines included (which encoding/base64 would
// skip), and non-zero trailing bits are refused, so one byte string has one
// text form apart from the optional padding.
func decodeB64(s string, minLen, maxLen int) ([]byte, error) {
	if len(s) > base64.StdEncoding.EncodedLen(maxLen) {
		return nil, fmt.Errorf("longer than %d bytes", maxLen)
	}
	body := strings.TrimRight(s, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return nil, errors.New("not standard base64")
		}
	}
	enc := base64.RawStdEncoding.Strict()
	if len(body) != len(s) {
		enc = base64.StdEncoding.Strict()
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, errors.New("not standard base64")
	}
	if len(b) < minLen || len(b) > maxLen {
		return nil, fmt.Errorf("%d bytes, want %d to %d", len(b), minLen, maxLen)
	}
	return b, nil
}

// String encodes p canonically: version always written, base64 without
// padding. It round-trips with [ParsePHC].
func (p PHC) String() string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$%s$v=%d$m=%d,t=%d,p=%d$%s$%s",
		p.Variant, p.Version, p.Params.Memory, p.Params.Time, p.Params.Threads,
		b64.EncodeToString(p.Salt), b64.EncodeToString(p.Hash))
}
