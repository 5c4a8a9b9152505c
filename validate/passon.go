package validate

import (
	"context"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// passOn lets a user path through without a token check when a policy
// says so: AUTH passOnNoUser for a user who does not exist, passOnNoToken
// and passthru (user store or RADIUS) for one without counted tokens.
type passOn struct {
	v   *Validator
	r   *Request
	t   *target
	pol *policies
	asg *assigner
}

// noUser answers for a user who does not exist: accepted under
// passOnNoUser, else the unknown-user error, which
// hide_specific_error_message replaces.
func (p *passOn) noUser(ctx context.Context) (Response, error) {
	if name, err := p.pol.flag(ctx, policy.ScopeAuthentication, "passOnNoUser"); err != nil {
		return Response{}, err
	} else if name != "" {
		p.pol.note(name)
		return Response{Value: true, User: p.t.u, Message: fmt.Sprintf("user does not exist, accepted due to '%s'", name)}, nil
	}
	if name, err := p.pol.flag(ctx, policy.ScopeAuthentication, "hide_specific_error_message"); err != nil {
		return Response{}, err
	} else if name != "" {
		p.pol.note(name)
		return Response{}, ErrAuthFailed
	}
	return Response{}, p.t.errUnknown()
}

// noToken accepts a user without counted tokens (toks without those
// passonnotoken_ignore_rollout_state lists) under passOnNoToken; ok is
// false otherwise.
func (p *passOn) noToken(ctx context.Context, toks []*token.Token) (Response, bool, error) {
	if n, err := p.count(ctx, toks, "passonnotoken_ignore_rollout_state"); err != nil || n > 0 {
		return Response{}, false, err
	}
	name, err := p.pol.flag(ctx, policy.ScopeAuthentication, "passOnNoToken")
	if err != nil || name == "" {
		return Response{}, false, err
	}
	p.pol.note(name)
	return Response{Value: true, User: p.t.u, Message: fmt.Sprintf("user has no token, accepted due to '%s'", name)}, true, nil
}

// count counts toks without those whose rollout state the action lists,
// and without a token whose enrollment via multichallenge waits for its
// first OTP on a new login (not for the answer to the enrollment's
// challenge, which must reach the token).
func (p *passOn) count(ctx context.Context, toks []*token.Token, action string) (int, error) {
	if len(toks) == 0 {
		return 0, nil
	}
	v, err := p.pol.value(ctx, policy.ScopeAuthentication, action)
	if err != nil {
		return 0, err
	}
	states := strings.Fields(v)
	n := 0
	for _, t := range toks {
		if !containsFold(states, t.RolloutState) && !(p.r.TransactionID == "" && pendingEnrollment(t)) {
			n++
		}
	}
	return n, nil
}

// passthru authenticates a user without counted tokens (toks without
// those passthru_ignore_rollout_state lists) against the user store or a
// RADIUS server, as the AUTH passthru policy says. ok is false when the
// user has counted tokens, no policy applies or the password was not
// accepted: the request then goes on to the token check.
func (p *passOn) passthru(ctx context.Context, toks []*token.Token) (Response, bool, error) {
	if n, err := p.count(ctx, toks, "passthru_ignore_rollout_state"); err != nil || n > 0 {
		return Response{}, false, err
	}
	v, name, err := p.pol.valueNamed(ctx, policy.ScopeAuthentication, "passthru")
	if err != nil {
		return Response{}, false, err
	}
	if v == "" {
		// A bare passthru (privacyIDEA's old boolean form) is userstore.
		if name, err = p.pol.flag(ctx, policy.ScopeAuthentication, "passthru"); err != nil || name == "" {
			return Response{}, false, err
		}
		v = "userstore"
	}
	if strings.EqualFold(v, "userstore") {
		if p.t.in == nil {
			return Response{}, false, nil
		}
		ok, err := p.t.in.CheckPassword(ctx, p.t.u.UID, p.r.Pass)
		if err != nil || !ok {
			return Response{}, false, err
		}
		p.pol.note(name)
		return Response{Value: true, User: p.t.u, Message: fmt.Sprintf("against userstore due to '%s'", name)}, true, nil
	}
	assign, err := p.pol.passthruAssignSpec(ctx)
	if err != nil {
		return Response{}, false, err
	}
	n := p.v.cfg.Tokens.Notify()
	if n == nil {
		return Response{}, false, nil
	}
	resp, err := n.RadiusAuth(ctx, v, p.t.u.Login, p.r.Pass, nil)
	if err != nil {
		// No answer is a failed passthru, not a failed request; the
		// password is never logged.
		zerolog.Ctx(ctx).Warn().Err(err).Str("component", "validate").Str("user", p.t.u.Login).Str("realm", p.t.u.Realm).
			Str("radius_server", v).Msg("passthru: RADIUS server gave no answer")
		return Response{}, false, nil
	}
	if resp.Code != notify.RadiusAccept {
		return Response{}, false, nil
	}
	p.pol.note(name)
	prefix, err := p.asg.passthru(ctx, assign)
	if err != nil {
		return Response{}, false, err
	}
	return Response{Value: true, User: p.t.u, Message: prefix + fmt.Sprintf("against RADIUS server %s due to '%s'", v, name)}, true, nil
}
