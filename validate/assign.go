package validate

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// Assignment on use: a user without tokens claims one of the unassigned
// tokens of the realm by authenticating with its OTP value.
//
//   - ENROLL autoassignment (any_pin | userstore) turns the failed
//     authentication of an existing user who owns no token into an
//     assignment when the password is PIN+OTP of such a token.
//   - AUTH passthru_assign (pin:6, 8:pin, optionally :window) assigns such a
//     token after a RADIUS passthru accepted the user.
//
// "Unassigned token of the realm" is a token without owner whose token
// realms include the user's realm (token.Service.Unassigned): an
// administrator puts tokens into a realm (/token/init with realm, /token/realm,
// an import with realms) for its users to claim. A token keeps its realms
// when unassigned, so a returned token can be claimed again; a token in no
// realm never is.
//
// A token is only assigned with an OTP value that is used up by the
// assignment: the match must advance a counter (hotp, totp, email, sms,
// paper, tan, motp, yubikey), and the counter advance, the new owner and the
// PIN commit in one store transaction that first checks again that the
// token has no owner and that the user's tokens did not change
// (token.Service.CommitAssign). Types whose value can be used again
// (daypassword, pw, spass, …) are never assigned this way, and a type
// that checks remotely (radius) is never asked (its check would forward
// the value to another server).
// Disabled, revoked, locked or otherwise unusable tokens are skipped. A
// failed attempt changes nothing on the candidate tokens.

// MsgAutoassigned is the detail message of an autoassignment.
const MsgAutoassigned = "Token assigned to user via Autoassignment"

// Autoassignment modes.
const (
	autoAnyPIN    = "any_pin"
	autoUserstore = "userstore"
)

// Limits of a passthru_assign value.
const (
	maxAssignOTPLen = 64
	maxAssignWindow = 10000
)

// assignSpec is a parsed passthru_assign value.
type assignSpec struct {
	pinFirst bool
	otpLen   int
	// window is the number of counter values tried from the token's
	// counter; 0 means the token's own count window.
	window int
	name   string
}

// parsePassthruAssign reads a passthru_assign value: "pin:<otplen>" (PIN
// before the OTP) or "<otplen>:pin" (OTP before the PIN), each optionally
// followed by ":<window>".
func parsePassthruAssign(v string) (assignSpec, bool) {
	parts := strings.Split(v, ":")
	if len(parts) != 2 && len(parts) != 3 {
		return assignSpec{}, false
	}
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	var s assignSpec
	var length string
	switch {
	case strings.EqualFold(parts[0], "pin"):
		s.pinFirst, length = true, parts[1]
	case strings.EqualFold(parts[1], "pin"):
		length = parts[0]
	default:
		return assignSpec{}, false
	}
	n, err := strconv.Atoi(length)
	if err != nil || n < 1 || n > maxAssignOTPLen {
		return assignSpec{}, false
	}
	s.otpLen = n
	if len(parts) == 3 {
		w, err := strconv.Atoi(parts[2])
		if err != nil || w < 1 || w > maxAssignWindow {
			return assignSpec{}, false
		}
		s.window = w
	}
	return s, true
}

// passthruAssignSpec returns the passthru_assign policy of the request, nil
// when none applies; a value that does not parse is a policy error.
func (p *policies) passthruAssignSpec(ctx context.Context) (*assignSpec, error) {
	sc, err := p.set(ctx, policy.ScopeAuthentication)
	if err != nil || sc.Empty() {
		return nil, err
	}
	v, names, err := unique(sc, "passthru_assign")
	if err != nil || v == "" {
		return nil, err
	}
	s, ok := parsePassthruAssign(v)
	if !ok {
		p.note(names...)
		return nil, errPolicyValue("passthru_assign", v)
	}
	s.name = names[0]
	return &s, nil
}

// assigner gives a user who owns no token one of the unassigned tokens of
// the user's realm whose OTP value the password holds: ENROLL
// autoassignment on a failed check, AUTH passthru_assign after a RADIUS
// passthru.
type assigner struct {
	v   *Validator
	r   *Request
	t   *target
	pol *policies
	// owned is the number of tokens the user owned when the user path
	// decided (an assignment commits only if it still is).
	owned int
}

// passthru runs after a RADIUS passthru accepted the request's
// password: split as spec says, the OTP part assigns the first unassigned
// token of the user's realm it matches, with the PIN part as token PIN.
// It returns the message prefix "auto-assigned <serial>, ", or "" when
// nothing was assigned (the passthru still succeeds).
func (a *assigner) passthru(ctx context.Context, spec *assignSpec) (string, error) {
	if spec == nil || !a.t.found {
		return "", nil
	}
	r := []rune(a.r.Pass)
	if len(r) < spec.otpLen {
		return "", nil
	}
	var pin, otpValue string
	if spec.pinFirst {
		pin, otpValue = string(r[:len(r)-spec.otpLen]), string(r[len(r)-spec.otpLen:])
	} else {
		otpValue, pin = string(r[:spec.otpLen]), string(r[spec.otpLen:])
	}
	c, err := a.newClaimer(ctx)
	if err != nil || c == nil {
		return "", err
	}
	for _, t := range c.cands {
		probe := t
		if spec.window > 0 {
			probe = t.Clone()
			probe.CountWindow = spec.window
		}
		got, err := c.try(ctx, probe, otpValue, &pin)
		if err != nil || got == claimStop {
			return "", err
		}
		if got == claimDone {
			a.pol.note(spec.name)
			a.log(ctx, c.done, "passthru_assign")
			return "auto-assigned " + c.done.Serial + ", ", nil
		}
	}
	return "", nil
}

// autoassign is the ENROLL autoassignment policy, applied to the decision
// of the user path: when an existing user who owns no token failed with
// "The user has no tokens assigned", the password is split for each
// unassigned token of the user's realm (PIN, then the last otplen
// characters) and the first token whose OTP matches is assigned to the
// user. Under any_pin the PIN part becomes the token PIN; under userstore
// it must be the user's user store password and the token PIN is left as
// it is. Only that outcome of the user check is turned into an
// assignment: a rejection by auth_max_fail stays a rejection, so the limit
// also bounds the guessing of OTP values of unassigned tokens.
func (a *assigner) autoassign(ctx context.Context, res Response) (Response, error) {
	if res.Value || res.Challenge || !a.t.found || a.pol.snap == nil || res.Message != MsgNoTokens {
		return res, nil
	}
	mode, name, err := a.pol.autoassignMode(ctx)
	if err != nil || mode == "" {
		return res, err
	}
	c, err := a.newClaimer(ctx)
	if err != nil || c == nil {
		return res, err
	}
	memo := map[string]bool{}
	svc := a.v.cfg.Tokens
	appendPIN := svc.Settings().AppendPIN
	for _, t := range c.cands {
		pin, otpValue, ok := split(t, a.r.Pass, false, appendPIN)
		if !ok || isPINOnly(svc, t) {
			continue
		}
		var newPIN *string
		if mode == autoAnyPIN {
			newPIN = &pin
		}
		got, err := c.tryWith(ctx, t, otpValue, newPIN, func() (bool, error) {
			if mode != autoUserstore {
				return true, nil
			}
			return a.t.checkPassword(ctx, pin, memo)
		})
		if err != nil {
			return res, err
		}
		if got == claimStop {
			return res, nil
		}
		if got == claimDone {
			a.pol.note(name)
			a.log(ctx, c.done, "autoassignment")
			res := tokenAnswer(a.t.u, MsgAutoassigned, c.done)
			res.Value = true
			return res, nil
		}
	}
	return res, nil
}

// autoassignMode returns the autoassignment mode of the user's ENROLL
// policies ("" when none applies) and the policy's name. A bare
// autoassignment (the boolean of old privacyIDEA versions) is any_pin;
// another value is a policy error.
func (p *policies) autoassignMode(ctx context.Context) (string, string, error) {
	sc, err := p.set(ctx, policy.ScopeEnrollment)
	if err != nil || sc.Empty() {
		return "", "", err
	}
	v, names, err := unique(sc, "autoassignment")
	if err != nil {
		return "", "", err
	}
	if v == "" {
		name, err := flagOf(sc, "autoassignment")
		if err != nil || name == "" {
			return "", "", err
		}
		return autoAnyPIN, name, nil
	}
	switch m := strings.ToLower(strings.TrimSpace(v)); m {
	case autoAnyPIN, autoUserstore:
		return m, names[0], nil
	}
	p.note(names...)
	return "", "", errPolicyValue("autoassignment", v)
}

// claimer tries the unassigned tokens of the user's realm one by one.
type claimer struct {
	a       *assigner
	cands   []*token.Token
	owned   int
	encrypt bool
	// done is the token assigned.
	done *token.Token
}

// Outcomes of one claim attempt.
const (
	claimNext = iota // no match, or lost to another request: try the next token
	claimDone        // assigned
	claimStop        // the user got a token meanwhile: assign nothing
)

// newClaimer lists the candidates; nil when the realm has none.
func (a *assigner) newClaimer(ctx context.Context) (*claimer, error) {
	svc := a.v.cfg.Tokens
	toks, err := svc.Unassigned(ctx, a.t.u.Realm)
	if err != nil || len(toks) == 0 {
		return nil, err
	}
	now := a.v.cfg.Now()
	c := &claimer{a: a}
	for _, t := range toks {
		if svc.Types().ChecksRemotely(t.Type) || svc.Unusable(t, now) != "" {
			continue
		}
		c.cands = append(c.cands, t)
	}
	if len(c.cands) == 0 {
		return nil, nil
	}
	// The count the decision saw, not a new reading: a token that
	// another request assigned since then must stop this one.
	c.owned = a.owned
	name, err := a.pol.flag(ctx, policy.ScopeEnrollment, "encrypt_pin")
	if err != nil {
		return nil, err
	}
	c.encrypt = name != ""
	return c, nil
}

// try claims t with otpValue and pin (nil keeps the token PIN).
func (c *claimer) try(ctx context.Context, t *token.Token, otpValue string, pin *string) (int, error) {
	return c.tryWith(ctx, t, otpValue, pin, nil)
}

// tryWith is try with a check that must also pass once the OTP matched
// (the user store password of autoassignment=userstore).
func (c *claimer) tryWith(ctx context.Context, t *token.Token, otpValue string, pin *string, also func() (bool, error)) (int, error) {
	a := c.a
	svc := a.v.cfg.Tokens
	m, err := svc.Verify(ctx, t, otpValue, a.r.Options, nil)
	if err != nil && !errors.Is(err, token.ErrCorrupt) {
		return claimNext, err
	}
	// Only a value that the commit uses up may claim a token.
	if !m.OK || m.Apply == nil || m.Counter < 0 || m.Delete {
		return claimNext, nil
	}
	if also != nil {
		ok, err := also()
		if err != nil || !ok {
			return claimNext, err
		}
	}
	done, err := svc.CommitAssign(ctx, t.Serial, m, token.Claim{Owner: a.t.u, PIN: pin, EncryptPIN: c.encrypt, Owned: c.owned})
	var ue *token.UnusableError
	switch {
	case err == nil:
		c.done = done
		return claimDone, nil
	case errors.Is(err, token.ErrOwnerChanged):
		return claimStop, nil
	case errors.Is(err, token.ErrReplay), errors.Is(err, token.ErrTaken), errors.As(err, &ue):
		return claimNext, nil
	}
	return claimNext, err
}

// log logs an assignment on use (never the password).
func (a *assigner) log(ctx context.Context, t *token.Token, action string) {
	zerolog.Ctx(ctx).Info().Str("component", "validate").Str("action", action).
		Str("user", a.t.u.Login).Str("realm", a.t.u.Realm).Str("resolver", a.t.u.Resolver).
		Str("serial", t.Serial).Str("token_type", t.Type).Msg("token assigned on use")
}
