package validate

import (
	"context"
	"slices"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

// ErrTriggerNoUser answers a triggerchallenge for an unknown user: the
// product description's HTTP 200 with status false and code 905
// (privacyIDEA answers 400 with 904 here; check keeps 904, which
// FreeRADIUS reads as NOTFOUND). It is audited as a rejection.
var ErrTriggerNoUser = apierr.New(apierr.Parameter, "The user can not be found in any resolver in this realm!")

// Trigger is /validate/triggerchallenge: challenges for all of a user's
// (or one serial's) challenge-capable tokens without a PIN, with its
// audit entry. With application_tokentype the request's Type narrows the
// user's tokens (not a serial's). With no challenge made the answer has
// no message (Messages holds the send error, if any).
func (v *Validator) Trigger(ctx context.Context, r Request) (Response, error) {
	a := v.newAuditor(r, ActionTrigger, EventTrigger, false)
	var res Response
	err := v.pre(ctx, a, &r)
	if err == nil {
		res, err = v.trigger(ctx, r, a)
	}
	res, err = a.finish(ctx, res, err)
	if perr := v.post(ctx, a, res, err); perr != nil {
		return Response{}, perr
	}
	return res, err
}

// trigger is Trigger before the audit; a refusal costs one key
// derivation, as those of check do.
func (v *Validator) trigger(ctx context.Context, r Request, a *auditor) (Response, error) {
	if r.Serial == "" && r.User == "" {
		return Response{}, ErrNoTarget
	}
	q, err := v.start(ctx, r, a)
	if err != nil {
		return Response{}, err
	}
	res, err := q.trigger(ctx, r)
	q.kdf.uniform(ctx, v, q.r.Pass, res, err)
	return res, err
}

// trigger makes the challenges of the user or serial r names.
func (q *req) trigger(ctx context.Context, r Request) (Response, error) {
	v := q.v
	if r.User != "" && !q.t.found {
		return Response{}, ErrTriggerNoUser
	}
	var toks []*token.Token
	var err error
	if r.Serial != "" {
		t, err := v.cfg.Tokens.Get(ctx, r.Serial)
		if err != nil {
			return Response{}, err
		}
		if r.User == "" && t.Assigned() {
			q.t.u, q.t.found = *t.Owner, true
		}
		toks = []*token.Token{t}
	} else {
		if toks, err = v.cfg.Tokens.ByOwner(ctx, q.t.u); err != nil {
			return Response{}, err
		}
		if toks, err = q.pol.filterType(ctx, r.Type, toks); err != nil {
			return Response{}, err
		}
	}
	types := v.cfg.Tokens.Types()
	toks = slices.DeleteFunc(toks, func(t *token.Token) bool { return types.NeverChallenges(t.Type) || t.Revoked })
	res, err := q.ch.trigger(ctx, toks)
	if err != nil {
		return res, err
	}
	if len(res.Challenges) == 0 {
		out := Response{User: res.User, SendFailed: res.SendFailed, Messages: []string{}}
		if res.SendFailed {
			out.Messages = []string{res.Message}
		}
		res = out
	}
	return res, q.pol.authorized(ctx)
}
