package validate

import (
	"context"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// req is one request in flight: the state its parts share (the request as
// the request policies left it, its target and its policies) and the
// parts, which point to that state and to each other and are made in the
// same allocation; its own methods are the paths of a check, which hand
// each step to the part whose job it is.
type req struct {
	v   *Validator
	r   Request
	t   target
	pol policies

	dec   decider
	com   committer
	ch    challenger
	resp  responder
	enr   enroller
	asg   assigner
	pass  passOn
	post  postPolicies
	modes clientModes
	kdf   kdfMeter
}

// Check decides a request and writes its audit entry and authentication
// record.
func (v *Validator) Check(ctx context.Context, r Request) (Response, error) {
	a := v.newAuditor(r, ActionCheck, EventCheck, true)
	var res Response
	var rev uint64
	pinned := false
	err := v.pre(ctx, a, &r)
	if err == nil {
		res, rev, pinned, err = v.check(ctx, r, a)
	}
	if err == nil && res.SendFailed && r.RaiseSendError {
		err = apierr.New(apierr.Server, res.Message)
	}
	if err == nil {
		// The items follow the configuration the request decided with
		// (the machine bindings are configuration).
		ictx := ctx
		if pinned {
			ictx = store.WithRevision(ctx, rev)
		}
		res.AuthItems = v.authItems(ictx, r, res)
		if r.SAMLAttributes && r.Serial == "" {
			res.SAMLAttributes = v.samlAttributes(ctx, res)
		}
	}
	res, err = a.finish(ctx, res, err)
	if perr := v.post(ctx, a, res, err); perr != nil {
		return Response{}, perr
	}
	return res, err
}

// check is Check before the audit. rev is the configuration revision of
// the request's policies, when pinned says it has them.
func (v *Validator) check(ctx context.Context, r Request, a *auditor) (res Response, rev uint64, pinned bool, err error) {
	if r.CancelEnrollment {
		res, err = v.cancelEnrollment(ctx, r, a)
		return res, 0, false, err
	}
	if r.Serial == "" && r.User == "" {
		return Response{}, 0, false, ErrNoTarget
	}
	q, err := v.start(ctx, r, a)
	if err != nil {
		return Response{}, 0, false, err
	}
	if q.pol.snap != nil {
		rev, pinned = q.pol.snap.Revision(), true
	}
	if q.r.Serial != "" {
		res, err = q.serialPath(ctx)
	} else {
		res, err = q.userPath(ctx)
		if err == nil {
			res, err = q.asg.autoassign(ctx, res)
		}
	}
	if err == nil {
		res, err = q.post.apply(ctx, res)
	}
	q.kdf.uniform(ctx, v, q.r.Pass, res, err)
	return res, rev, pinned, err
}

// start checks the serial and user of r, takes the policies and resolves
// the user. Once the request exists (q is not nil) a's entry names its
// user and policies, whatever the error.
func (v *Validator) start(ctx context.Context, r Request, a *auditor) (*req, error) {
	if strings.Contains(r.Serial, "*") {
		return nil, ErrInvalidSerial
	}
	if strings.Contains(r.User, "%") {
		return nil, ErrInvalidUser
	}
	q, err := v.newReq(ctx, r, a)
	if err != nil {
		return nil, err
	}
	if q.pol.snap != nil {
		// The realm lookups of the resolution answer from the
		// configuration of the request's policy snapshot when it is
		// cached, without a store read of their own.
		ctx = store.WithRevision(ctx, q.pol.snap.Revision())
	}
	if a.event == EventCheck {
		if err := q.pol.requireAPIKey(ctx, v.cfg.Realms, v.splitAtSign(), &q.r); err != nil {
			return q, err
		}
	}
	if err := q.t.resolve(ctx); err != nil {
		return q, err
	}
	return q, nil
}

// newReq takes the request's policy snapshot and wires the parts to the
// shared state; a's entry reads the request's user and policies from now
// on.
func (v *Validator) newReq(ctx context.Context, r Request, a *auditor) (*req, error) {
	snap := r.Policies
	if snap == nil && v.cfg.Policies != nil {
		var err error
		if snap, err = v.cfg.Policies.Snapshot(ctx); err != nil {
			return nil, err
		}
	}
	q := &req{v: v, r: r}
	rq, t, pol := &q.r, &q.t, &q.pol
	*pol = policies{snap: snap, who: &rq.Caller, u: &t.u, t: t}
	*t = target{v: v, r: rq, pol: pol}
	q.com = committer{v: v, t: t, pol: pol, a: a}
	q.modes = clientModes{v: v, r: rq, t: t, pol: pol}
	q.ch = challenger{v: v, t: t, pol: pol, modes: &q.modes}
	q.enr = enroller{v: v, r: rq, t: t, pol: pol, ch: &q.ch}
	q.resp = responder{v: v, r: rq, t: t, pol: pol, com: &q.com, ch: &q.ch, kdf: &q.kdf}
	q.dec = decider{v: v, r: rq, t: t, pol: pol, com: &q.com, ch: &q.ch, resp: &q.resp, kdf: &q.kdf}
	q.asg = assigner{v: v, r: rq, t: t, pol: pol}
	q.pass = passOn{v: v, r: rq, t: t, pol: pol, asg: &q.asg}
	q.post = postPolicies{v: v, t: t, pol: pol, enr: &q.enr, modes: &q.modes}
	a.pol = pol
	return q, nil
}

// serialPath checks the password against the token the request names (its
// owner, when it has one, becomes the request's user).
func (q *req) serialPath(ctx context.Context) (Response, error) {
	t, err := q.v.cfg.Tokens.Get(ctx, q.r.Serial)
	if err != nil {
		return Response{}, err
	}
	if q.r.User != "" && (!t.Assigned() || t.Owner.UID != q.t.u.UID || t.Owner.Resolver != q.t.u.Resolver) {
		return Response{}, ErrSerialNotUsers
	}
	if t.Assigned() {
		q.t.u, q.t.found = *t.Owner, true
	}
	if q.r.OTPOnly {
		return q.dec.otpOnly(ctx, t)
	}
	return q.dec.decide(ctx, []*token.Token{t}, false)
}

// userPath is check_user_pass with its policy wrappers, outermost first:
// auth_cache, then the user checks.
func (q *req) userPath(ctx context.Context) (Response, error) {
	cp, err := q.pol.cachePolicy(ctx)
	if err != nil {
		return Response{}, err
	}
	useCache := cp.on && q.t.found && q.v.cfg.Store != nil
	if useCache {
		hit, err := q.v.cacheHit(ctx, q.t.u, q.r.Pass, cp)
		if err != nil {
			return Response{}, err
		}
		if hit {
			q.pol.note(cp.names...)
			return Response{Value: true, User: q.t.u, Message: MsgAuthCache}, nil
		}
	}
	res, err := q.userCheck(ctx)
	if err == nil && res.Value && useCache {
		if err := q.v.cacheAdd(ctx, q.t.u, q.r.Pass, cp); err != nil {
			return Response{}, err
		}
	}
	return res, err
}

// userCheck: unknown user (passOnNoUser), no token (passOnNoToken), the
// rate limits around passthru and the token check.
func (q *req) userCheck(ctx context.Context) (Response, error) {
	if !q.t.found {
		return q.pass.noUser(ctx)
	}
	toks, err := q.v.cfg.Tokens.ByOwner(ctx, q.t.u)
	if err != nil {
		return Response{}, err
	}
	q.asg.owned = len(toks)
	if res, ok, err := q.pass.noToken(ctx, toks); err != nil || ok {
		return res, err
	}
	res, err := q.tokenCheck(ctx, toks)
	if err != nil {
		return res, err
	}
	return limiter{v: q.v, t: &q.t, pol: &q.pol}.apply(ctx, res)
}

// tokenCheck is passthru, then force_challenge_response and the type
// filter around the core decision.
func (q *req) tokenCheck(ctx context.Context, toks []*token.Token) (Response, error) {
	if res, ok, err := q.pass.passthru(ctx, toks); err != nil || ok {
		return res, err
	}
	name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "force_challenge_response")
	if err != nil {
		return Response{}, err
	}
	if toks, err = q.pol.filterType(ctx, q.r.Type, toks); err != nil {
		return Response{}, err
	}
	if len(toks) == 0 {
		return Response{User: q.t.u, Message: MsgNoTokens}, nil
	}
	return q.dec.decide(ctx, toks, name != "")
}

// filterType applies the request's type parameter typ under AUTHZ
// application_tokentype.
func (p *policies) filterType(ctx context.Context, typ string, toks []*token.Token) ([]*token.Token, error) {
	if typ == "" {
		return toks, nil
	}
	name, err := p.flag(ctx, policy.ScopeAuthorization, "application_tokentype")
	if err != nil || name == "" {
		return toks, err
	}
	out := make([]*token.Token, 0, len(toks))
	for _, t := range toks {
		if strings.EqualFold(t.Type, typ) {
			out = append(out, t)
		}
	}
	return out, nil
}
