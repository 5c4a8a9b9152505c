package token

import "context"

// SPass is the simple pass token (prefix PISP): the whole password is the
// token PIN, checked by the caller, so the type itself only accepts an
// empty OTP part.
type SPass struct{}

var (
	_ Type    = SPass{}
	_ PINOnly = SPass{}
)

// Name implements Type.
func (SPass) Name() string { return "spass" }

// Prefix implements Type.
func (SPass) Prefix() string { return "PISP" }

// PINOnly implements PINOnly: the caller does not split off an OTP part.
func (SPass) PINOnly() bool { return true }

// Enroll implements Type: a seed is generated (or otpkey taken as hex) only
// because privacyIDEA keeps one for every token; it is never used. genkey
// together with otpkey is refused. The PIN comes from the "pin" parameter
// as for every type.
func (SPass) Enroll(ctx context.Context, e *Enroll) error {
	key, _, err := keyFromParams(e, false)
	if err != nil {
		return err
	}
	e.Key = key
	e.Detail["otpkey"] = e.keyDetail(key, false)
	return nil
}

// Check implements Type: the OTP part must be empty (the PIN, already
// checked by the caller, is the whole password).
func (SPass) Check(ctx context.Context, c *Check) (Match, error) {
	return Match{OK: c.OTP == "", Counter: -1}, nil
}

// NeverChallenges implements NeverChallenger: the type has no challenge.
func (SPass) NeverChallenges() bool { return true }
