package token

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
)

// ApplSpec is the application-specific password token (prefix PIAS): a
// static password for one service (service_id), kept only as a password
// hash so it cannot be read back.
type ApplSpec struct{}

var _ Type = ApplSpec{}

// FieldPasswordHash is the sealed field holding the PHC hash of an
// applspec password.
const FieldPasswordHash = "password_hash"

// InfoServiceID is the tokeninfo key of the service an applspec password
// belongs to.
const InfoServiceID = "service_id"

// Name implements Type.
func (ApplSpec) Name() string { return "applspec" }

// Prefix implements Type.
func (ApplSpec) Prefix() string { return "PIAS" }

// Enroll implements Type: service_id is required (kept as tokeninfo);
// otpkey is the password in plain text or, when missing or with genkey, a
// generated one of applspec.length (24) characters from applspec.contents
// ("cn"). Only a PHC hash of the password is stored (sealed); the detail
// "password" returns it this once. otplen becomes its length.
func (ApplSpec) Enroll(ctx context.Context, e *Enroll) error {
	sid := strings.TrimSpace(e.Params.Str(InfoServiceID))
	if sid == "" {
		return apierr.MissingParameter(InfoServiceID)
	}
	if len(sid) > 256 {
		return paramErr("service_id is too long")
	}
	pw, _, err := staticPassword(e, "applspec", 24)
	if err != nil {
		return err
	}
	h, err := e.Service.HashPIN(ctx, pw)
	if err != nil {
		return err
	}
	e.SetSecret(FieldPasswordHash, []byte(h))
	e.Token.SetInfo(InfoServiceID, sid)
	e.Token.OTPLen = utf8.RuneCountInString(pw)
	e.Detail["password"] = pw
	return nil
}

// Check implements Type: the OTP part is verified against the stored hash
// (one KDF call). There is no counter.
func (ApplSpec) Check(ctx context.Context, c *Check) (Match, error) {
	ok, hashed, err := checkPasswordHash(ctx, c.Service, c.Token, c.OTP)
	if err != nil {
		return Match{Counter: -1, Hashed: hashed}, err
	}
	return Match{OK: ok, Counter: -1, Hashed: hashed}, nil
}

// checkPasswordHash verifies pw against the hash sealed in
// FieldPasswordHash, with the service's PIN hasher; hashed tells whether
// that ran a key derivation.
func checkPasswordHash(ctx context.Context, s *Service, t *Token, pw string) (ok, hashed bool, err error) {
	h, err := s.Secret(t, FieldPasswordHash)
	if err != nil || len(h) == 0 || pw == "" {
		return false, false, err
	}
	ht := &Token{Serial: t.Serial, PIN: string(h)}
	ok, err = s.CheckPIN(ctx, ht, pw)
	return ok, ht.PINHashed(), err
}

// NeverChallenges implements NeverChallenger: the type has no challenge.
func (ApplSpec) NeverChallenges() bool { return true }
