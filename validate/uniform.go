package validate

import (
	"context"
	"errors"

	"github.com/authsrv/authsrv/apierr"
)

// kdfMeter records whether a request ran one of our key derivations (a
// hashed PIN, or a token whose OTP is a hashed password), so that a
// rejection that ran none costs one dummy derivation and the time of a
// refusal does not tell whether the user exists, has tokens, or has a PIN
// (a user store's own password check is not ours and does not count).
type kdfMeter struct {
	ran bool
}

// note records a derivation when hashed is set (a check that was started:
// a derivation that failed for want of room in the KDF budget counts, so
// an overloaded server is not asked for a second one).
func (k *kdfMeter) note(hashed bool) {
	k.ran = k.ran || hashed
}

// uniform runs one dummy derivation of pass at the configured cost when
// the answer (res, err) refuses the request and no derivation ran; a
// success, a challenge to answer, and a failure of the server itself
// (no error code, server error, busy) cost nothing more.
func (k *kdfMeter) uniform(ctx context.Context, v *Validator, pass string, res Response, err error) {
	if k.ran || !refusal(res, err) {
		return
	}
	k.ran = true
	v.cfg.Tokens.DummyPIN(ctx, pass)
}

// refusal reports whether the answer (res, err) refuses the request: an
// error with a code other than the server's own failures, or no success
// and no challenge.
func refusal(res Response, err error) bool {
	if err == nil {
		return !res.Value && !res.Challenge && len(res.Challenges) == 0
	}
	e, ok := errors.AsType[*apierr.Error](err)
	return ok && e.Code != apierr.Server && e.Code != apierr.Busy
}
