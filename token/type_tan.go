package token

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/internal/otp"
)

// TAN is the TAN list token (prefix PITN): a list of one-time values, any
// unused one of which is accepted once.
//
// Each TAN is kept in tokeninfo "tan.tan<N>" as "<salt hex>:<hash hex>",
// the hash being SHA-256(salt || TAN) with an 8-byte random salt per entry.
// TAN lists adopted from privacyIDEA keep its layout (see tanTextSalt). A
// fast salted hash is enough here: a listed TAN is worthless once used,
// and reading the tokeninfo already requires database access; the plain
// TANs are only in the init response. "tan.count" is the number of unused
// TANs.
type TAN struct{}

var (
	_ Type    = TAN{}
	_ Adopter = TAN{}
)

// Tokeninfo keys of the tan type.
const (
	InfoTANPrefix = "tan.tan"
	InfoTANCount  = "tan.count"
)

const (
	defaultTANCount = 100
	maxTANCount     = 1000
	tanSaltLen      = 8
)

// HiddenInfo reports whether a tokeninfo key must be left out of token
// listings: the hashed TANs of a tan token are of no use to an
// administrator and only help an offline guesser.
func HiddenInfo(t *Token, key string) bool { return strings.HasPrefix(key, InfoTANPrefix) }

// Name implements Type.
func (TAN) Name() string { return "tan" }

// Prefix implements Type.
func (TAN) Prefix() string { return "PITN" }

// Enroll implements Type: either "tans", a whitespace-separated list of
// TANs of equal length (otplen becomes that length; the seed is random and
// unused), or tantoken_count (100) HOTP values of a key from otpkey or
// genkey, with HOTP's init detail. Both at most 1000, and in practice
// bounded by the tokeninfo limit (maxInfoKeys). Earlier TANs of a
// re-initialised token are dropped. The detail "otps" lists the TANs by
// index.
func (TAN) Enroll(ctx context.Context, e *Enroll) error {
	p, t := e.Params, e.Token
	var tans []string
	if v, ok := p.Get("tans"); ok {
		tans = strings.Fields(v)
		if len(tans) == 0 {
			return paramErr("tans must list at least one TAN")
		}
		if len(tans) > maxTANCount {
			return paramErr("tans lists more than %d TANs", maxTANCount)
		}
		n := utf8.RuneCountInString(tans[0])
		if n > maxStaticPassword {
			return paramErr("the TANs are too long (at most %d characters)", maxStaticPassword)
		}
		for _, s := range tans {
			if !utf8.ValidString(s) || utf8.RuneCountInString(s) != n {
				return paramErr("all TANs must be valid text of the same length")
			}
		}
		key, err := e.Service.RandomBytes(20)
		if err != nil {
			return err
		}
		e.Key = key
		t.OTPLen = n
	} else {
		n, err := intParam(p, "tantoken_count", defaultTANCount, 1, maxTANCount)
		if err != nil {
			return err
		}
		if p.Bool("2stepinit") {
			return paramErr("2stepinit is not possible for tan tokens")
		}
		if err := enrollOATH(e, "tan", 0); err != nil {
			return err
		}
		list := hotpList(e.Key, n, t.OTPLen, t.Hash())
		tans = make([]string, n)
		for i := range tans {
			tans[i] = list[strconv.Itoa(i)]
		}
	}
	for k := range t.Info {
		if strings.HasPrefix(k, InfoTANPrefix) {
			delete(t.Info, k)
		}
	}
	delete(t.Info, InfoTANCount)
	if free := maxInfoKeys - len(t.Info) - 1; len(tans) > free {
		return paramErr("at most %d TANs fit into this token", max(free, 0))
	}
	otps := make(map[string]string, len(tans))
	for i, s := range tans {
		salt, err := e.Service.RandomBytes(tanSaltLen)
		if err != nil {
			return err
		}
		t.SetInfo(InfoTANPrefix+strconv.Itoa(i), hex.EncodeToString(salt)+":"+hex.EncodeToString(tanHash(salt, s)))
		otps[strconv.Itoa(i)] = s
	}
	t.SetInfo(InfoTANCount, strconv.Itoa(len(tans)))
	e.Detail["otps"] = otps
	return nil
}

// tanTextSalt starts a TAN entry adopted from another system,
// "ts:<salt text>:<hash hex>", whose hash is SHA-256(TAN || salt text):
// the layout of privacyIDEA's TAN lists (verified with a privacyIDEA
// 3.10 database), which hashes the salt's hex text after the TAN.
const tanTextSalt = "ts:"

// Adopt implements Adopter: the unused TANs arrive hashed, as
// "tan.tan<N>" parameters "<salt text>:<hash hex>" (see tanTextSalt); they
// are kept as they are, marked, and only they are accepted. otpkey (hex)
// is kept as the seed when given, else a random one is.
func (TAN) Adopt(ctx context.Context, e *Enroll) error {
	p, t := e.Params, e.Token
	for k := range t.Info {
		if strings.HasPrefix(k, InfoTANPrefix) {
			delete(t.Info, k)
		}
	}
	delete(t.Info, InfoTANCount)
	n := 0
	for k, v := range p {
		idx, ok := strings.CutPrefix(k, InfoTANPrefix)
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(idx); err != nil || i < 0 || strconv.Itoa(i) != idx {
			return paramErr("%s is not a TAN entry", k)
		}
		salt, hash, ok := strings.Cut(v, ":")
		if h, err := hex.DecodeString(hash); !ok || salt == "" || err != nil || len(h) != sha256.Size {
			return paramErr("%s is not a salted SHA-256 TAN hash", k)
		}
		t.SetInfo(k, tanTextSalt+v)
		n++
	}
	if len(t.Info) > maxInfoKeys-1 {
		return paramErr("too many TANs for one token")
	}
	t.SetInfo(InfoTANCount, strconv.Itoa(n))
	if k := strings.TrimSpace(p.Str("otpkey")); k != "" {
		key, err := otp.ParseKey(k, p.Str("otpkeyformat"))
		if err != nil {
			return paramErr("The otpkey is not valid: it must be hex")
		}
		e.Key = key
		return nil
	}
	key, err := e.Service.RandomBytes(20)
	if err != nil {
		return err
	}
	e.Key = key
	return nil
}

func tanHash(salt []byte, tan string) []byte {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(tan))
	return h.Sum(nil)
}

// tanMatches compares tan with one stored "<salt>:<hash>" entry.
func tanMatches(entry, tan string) bool {
	if rest, adopted := strings.CutPrefix(entry, tanTextSalt); adopted {
		salt, hashHex, ok := strings.Cut(rest, ":")
		want, err := hex.DecodeString(hashHex)
		if !ok || err != nil {
			return false
		}
		got := sha256.Sum256([]byte(tan + salt))
		return subtle.ConstantTimeCompare(got[:], want) == 1
	}
	saltHex, hashHex, ok := strings.Cut(entry, ":")
	if !ok {
		return false
	}
	salt, err1 := hex.DecodeString(saltHex)
	want, err2 := hex.DecodeString(hashHex)
	if err1 != nil || err2 != nil {
		return false
	}
	return subtle.ConstantTimeCompare(tanHash(salt, tan), want) == 1
}

// Check implements Type: the OTP part is compared with every unused TAN
// (no early exit); the counter is the matched TAN's index. Apply deletes
// that TAN from the fresh token and refuses when it is already gone, so a
// TAN is accepted once however many requests race.
func (TAN) Check(ctx context.Context, c *Check) (Match, error) {
	if c.OTP == "" {
		return Match{Counter: -1}, nil
	}
	matched := ""
	for _, k := range slices.Sorted(maps.Keys(c.Token.Info)) {
		if !strings.HasPrefix(k, InfoTANPrefix) {
			continue
		}
		if tanMatches(c.Token.Info[k], c.OTP) && matched == "" {
			matched = k
		}
	}
	if matched == "" {
		return Match{Counter: -1}, nil
	}
	entry := c.Token.Info[matched]
	n, err := strconv.ParseInt(strings.TrimPrefix(matched, InfoTANPrefix), 10, 64)
	if err != nil {
		n = -1
	}
	return Match{OK: true, Counter: n, Apply: func(t *Token) bool {
		if v, ok := t.Info[matched]; !ok || v != entry {
			return false
		}
		delete(t.Info, matched)
		left := 0
		for k := range t.Info {
			if strings.HasPrefix(k, InfoTANPrefix) {
				left++
			}
		}
		t.SetInfo(InfoTANCount, strconv.Itoa(left))
		return true
	}}, nil
}
