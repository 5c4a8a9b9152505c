package token

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/secret"
)

// PW is privacyIDEA's static password token (prefix PW): the "OTP" is a
// fixed password, so the token only makes sense together with a PIN or as
// a second factor nobody has to type from a device.
type PW struct{}

var _ Type = PW{}

// maxStaticPassword bounds given static passwords (characters), so a
// token record cannot be bloated through the otpkey parameter.
const maxStaticPassword = 256

// Name implements Type.
func (PW) Name() string { return "pw" }

// Prefix implements Type.
func (PW) Prefix() string { return "PW" }

// Enroll implements Type: otpkey is the password in plain text; without it
// (or with genkey) a password of pw.length (12) characters from
// pw.contents ("cn") is generated. otplen becomes the password's length in
// characters. The password is sealed as the seed and returned in the
// detail as "password" and as the "otpkey" seed object.
func (PW) Enroll(ctx context.Context, e *Enroll) error {
	pw, _, err := staticPassword(e, "pw", 12)
	if err != nil {
		return err
	}
	e.Key = []byte(pw)
	e.Token.OTPLen = utf8.RuneCountInString(pw)
	e.Detail["password"] = pw
	e.Detail["otpkey"] = e.keyDetail(e.Key, false)
	return nil
}

// Check implements Type: the OTP part must equal the password (compared in
// constant time). A static password has no counter and no replay
// protection.
func (PW) Check(ctx context.Context, c *Check) (Match, error) {
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	return Match{OK: secret.Equal(key, []byte(c.OTP)), Counter: -1}, nil
}

// staticPassword reads the password of the pw and applspec types: otpkey
// in plain text, or generated when otpkey is missing or genkey is set
// (both together are refused). The length and contents of a generated
// password come from the parameters "<typ>.length" and "<typ>.contents".
// It reports whether the password was generated.
func staticPassword(e *Enroll, typ string, defLen int) (string, bool, error) {
	p := e.Params
	given := p.Str("otpkey")
	gen := p.Bool("genkey")
	if given != "" && gen {
		return "", false, ErrGenkeyAndOtpkey
	}
	if given != "" {
		if !utf8.ValidString(given) {
			return "", false, paramErr("The otpkey must be valid UTF-8 text")
		}
		if utf8.RuneCountInString(given) > maxStaticPassword {
			return "", false, paramErr("The otpkey is too long (at most %d characters)", maxStaticPassword)
		}
		return given, false, nil
	}
	pw, err := generateFromParams(e, typ, defLen, "cn")
	return pw, true, err
}

// generateFromParams generates a random string whose length and contents
// code come from the parameters "<typ>.length" and "<typ>.contents".
func generateFromParams(e *Enroll, typ string, defLen int, defContents string) (string, error) {
	n, err := intParam(e.Params, typ+".length", defLen, 1, otp.MaxGenerateLength)
	if err != nil {
		return "", err
	}
	contents := defContents
	if v := strings.TrimSpace(e.Params.Str(typ + ".contents")); v != "" {
		contents = v
	}
	s, err := e.Service.RandomString(n, contents)
	if err != nil {
		return "", paramErr("%s.contents is not a usable contents code for %d characters", typ, n)
	}
	return s, nil
}

// intParam reads an integer parameter in [lo, hi]; missing or empty gives
// def.
func intParam(p Params, key string, def, lo, hi int) (int, error) {
	v := strings.TrimSpace(p.Str(key))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, paramErr("%s must be a number from %d to %d", key, lo, hi)
	}
	return n, nil
}
