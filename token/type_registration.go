package token

import (
	"bytes"
	"context"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
)

// Registration is the registration code token (prefix REG): a generated
// one-time code that lets a new user log in once, e.g. to enroll a real
// token. The token is deleted after its first successful use.
type Registration struct{}

var (
	_ Type    = Registration{}
	_ Adopter = Registration{}
)

// Name implements Type.
func (Registration) Name() string { return "registration" }

// Prefix implements Type.
func (Registration) Prefix() string { return "REG" }

// Enroll implements Type: the code is always generated (otpkey and genkey
// are ignored), registration.length (24) characters from
// registration.contents ("cn"). otplen becomes its length; the code is
// sealed as the seed and returned once as "registrationcode".
func (Registration) Enroll(ctx context.Context, e *Enroll) error {
	code, err := generateFromParams(e, "registration", 24, "cn")
	if err != nil {
		return err
	}
	e.Key = []byte(code)
	e.Token.OTPLen = utf8.RuneCountInString(code)
	e.Detail["registrationcode"] = code
	return nil
}

// Adopt implements Adopter: the code of a token adopted from another
// system is otpkey, in plain text; otplen becomes its length.
func (Registration) Adopt(ctx context.Context, e *Enroll) error {
	code := e.Params.Str("otpkey")
	if code == "" {
		return apierr.MissingParameter("otpkey")
	}
	if !utf8.ValidString(code) || utf8.RuneCountInString(code) > maxStaticPassword {
		return paramErr("The registration code must be valid UTF-8 text of at most %d characters", maxStaticPassword)
	}
	e.Key = []byte(code)
	e.Token.OTPLen = utf8.RuneCountInString(code)
	return nil
}

// Check implements Type: the OTP part must equal the code. A match deletes
// the token; its Apply refuses when the token no longer holds the code
// that was checked (re-initialised meanwhile).
func (Registration) Check(ctx context.Context, c *Check) (Match, error) {
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	if !secret.Equal(key, []byte(c.OTP)) {
		return Match{Counter: -1}, nil
	}
	sealed := c.Token.Sealed[FieldKey]
	return Match{OK: true, Counter: -1, Delete: true, Apply: func(t *Token) bool {
		return bytes.Equal(t.Sealed[FieldKey], sealed)
	}}, nil
}
