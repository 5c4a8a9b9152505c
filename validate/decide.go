package validate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// candidate is a token under consideration with its split password.
type candidate struct {
	t        *token.Token
	pin, otp string
	m        token.Match
}

// split divides pass into PIN and OTP for t (PIN first; the OTP is the
// last otplen characters). ok is false when pass is shorter than otplen.
func split(t *token.Token, pass string, pinOnly bool) (pin, otp string, ok bool) {
	if pinOnly {
		return pass, "", true
	}
	r := []rune(pass)
	if len(r) < t.OTPLen {
		return "", "", false
	}
	return string(r[:len(r)-t.OTPLen]), string(r[len(r)-t.OTPLen:]), true
}

// pinChecker checks PIN parts under the otppin policy, each user store
// password at most once per request.
type pinChecker struct {
	q    *req
	mode string
	memo map[string]bool
}

func (p *pinChecker) check(ctx context.Context, t *token.Token, pin string) (bool, error) {
	switch p.mode {
	case "none":
		return pin == "", nil
	case "userstore":
		if !t.Assigned() {
			return false, nil
		}
		if p.q.in == nil && p.q.v.cfg.Resolvers != nil {
			// The serial path: the owner's user store.
			in, err := p.q.v.cfg.Resolvers.Instance(ctx, t.Owner.Resolver)
			if err != nil && !errors.Is(err, resolver.ErrNotFound) {
				return false, err
			}
			p.q.in = in
		}
		if p.q.in == nil {
			return false, nil
		}
		if v, ok := p.memo[pin]; ok {
			return v, nil
		}
		ok, err := p.q.in.CheckPassword(ctx, p.q.u.UID, pin)
		if err != nil {
			return false, err
		}
		p.memo[pin] = ok
		return ok, nil
	}
	return p.q.v.cfg.Tokens.CheckPIN(ctx, t, pin)
}

// decide runs privacyIDEA's check_token_list over the candidate tokens.
func (q *req) decide(ctx context.Context, all []*token.Token) (Response, error) {
	svc := q.v.cfg.Tokens
	now := q.v.cfg.Now()
	var toks []*token.Token
	for _, t := range all {
		if !t.Revoked {
			toks = append(toks, t)
		}
	}
	if len(toks) == 0 {
		return Response{}, ErrAllRevoked
	}
	if v, err := q.pol.value(ctx, policy.ScopeAuthentication, "disabled_token_types"); err != nil {
		return Response{}, err
	} else if v != "" {
		off := strings.Fields(strings.ToLower(v))
		toks = slices.DeleteFunc(toks, func(t *token.Token) bool { return slices.Contains(off, t.Type) })
	}
	slices.SortStableFunc(toks, func(a, b *token.Token) int { return strings.Compare(a.Type[:1], b.Type[:1]) })

	var usable []*token.Token
	var reasons []string
	for _, t := range toks {
		if why := svc.Unusable(t, now); why != "" {
			if !slices.Contains(reasons, why) {
				reasons = append(reasons, why)
			}
			continue
		}
		usable = append(usable, t)
	}
	if len(toks) == 0 {
		return Response{User: q.u, Message: MsgNoSuitable}, nil
	}
	if q.r.TransactionID != "" {
		return q.answer(ctx, usable, toks)
	}
	if len(usable) == 0 {
		return Response{User: q.u, Message: strings.Join(reasons, ", ")}, nil
	}

	mode, err := q.pol.value(ctx, policy.ScopeAuthentication, "otppin")
	if err != nil {
		return Response{}, err
	}
	pc := &pinChecker{q: q, mode: strings.ToLower(mode), memo: map[string]bool{}}
	// Phase 1: the OTP decides which token's PIN is worth a key derivation.
	// Under force_challenge_response PIN and OTP are never checked
	// together.
	cands := make([]*candidate, 0, len(usable))
	for _, t := range usable {
		pinOnly := isPINOnly(svc, t)
		pin, otp, ok := split(t, q.r.Pass, pinOnly)
		c := &candidate{t: t, pin: pin, otp: otp}
		cands = append(cands, c)
		if !ok || q.force {
			continue
		}
		m, err := svc.Verify(ctx, t, otp, q.r.Options, nil)
		if err != nil && !errors.Is(err, token.ErrCorrupt) {
			return Response{}, err
		}
		c.m = m
	}
	for _, c := range cands {
		if !c.m.OK {
			continue
		}
		ok, err := pc.check(ctx, c.t, c.pin)
		if err != nil {
			return Response{}, err
		}
		if !ok {
			continue
		}
		committed, stale, err := q.commit(ctx, c.t, c.m, fmt.Sprintf(MsgMatching, 1))
		var ue *token.UnusableError
		switch {
		case errors.Is(err, token.ErrReplay):
			c.m = token.Match{Message: token.MsgReplayed}
			continue
		case errors.As(err, &ue):
			c.m = token.Match{}
			continue
		case err != nil:
			return Response{}, err
		}
		if err := q.resetAll(ctx, committed); err != nil {
			return Response{}, err
		}
		return q.pinChange(ctx, q.success(fmt.Sprintf(MsgMatching, 1), committed, stale), committed)
	}

	// Phase 2: no success. PIN alone → challenge; PIN right → wrong OTP.
	crTypes, err := q.pol.value(ctx, policy.ScopeAuthentication, "challenge_response")
	if err != nil {
		return Response{}, err
	}
	crList := strings.Fields(strings.ToLower(crTypes))
	var challengeReq, pinMatched []*candidate
	for _, c := range cands {
		if canChallenge(svc.Types(), c.t, crList) {
			ok, err := pc.check(ctx, c.t, q.r.Pass)
			if err != nil {
				return Response{}, err
			}
			if ok {
				challengeReq = append(challengeReq, c)
				continue
			}
		}
		// A pass shorter than otplen is a PIN mismatch; a PIN-only type
		// has no "wrong OTP" outcome.
		if _, _, fits := split(c.t, q.r.Pass, false); fits && !isPINOnly(svc, c.t) && !q.force {
			ok, err := pc.check(ctx, c.t, c.pin)
			if err != nil {
				return Response{}, err
			}
			if ok {
				pinMatched = append(pinMatched, c)
			}
		}
	}
	if len(challengeReq) > 0 {
		return q.challenge(ctx, challengeReq)
	}
	if len(pinMatched) > 0 {
		msg := token.MsgWrongOTP
		res := Response{User: q.u, Message: msg}
		if len(pinMatched) == 1 {
			if pinMatched[0].m.Message == token.MsgReplayed {
				msg = token.MsgReplayed
			}
			res.setToken(msg, pinMatched[0].t)
		}
		if len(pinMatched) != 1 || pinMatched[0].m.Remember == nil {
			return q.fail(ctx, pinMatched, res, true)
		}
		// AutoResync remembers the first value: a resync challenge may
		// answer instead, so the caller records the outcome.
		if _, err := q.fail(ctx, pinMatched, res, false); err != nil {
			return Response{}, err
		}
		if ch, ok, err := q.resyncChallenge(ctx, pinMatched[0].t); err != nil || ok {
			return ch, err
		}
		return res, nil
	}
	for _, c := range cands {
		// AutoResync remembers a value only after the right PIN.
		c.m.Remember = nil
	}
	return q.fail(ctx, cands, Response{User: q.u, Message: MsgWrongPIN}, true)
}

func isPINOnly(svc *token.Service, t *token.Token) bool {
	typ, ok := svc.Types().Get(t.Type)
	if !ok {
		return false
	}
	p, ok := typ.(token.PINOnly)
	return ok && p.PINOnly()
}

// canChallenge reports whether t answers its PIN alone with a challenge:
// always for a type that challenges on its PIN, never for a type without
// challenges, else when the challenge_response policy lists the type.
func canChallenge(types *token.Registry, t *token.Token, policyTypes []string) bool {
	if types.NeverChallenges(t.Type) {
		return false
	}
	return types.ChallengesOnPIN(t.Type) || slices.Contains(policyTypes, t.Type)
}

// resetAll applies reset_all_user_tokens after a success.
func (q *req) resetAll(ctx context.Context, t *token.Token) error {
	if !t.Assigned() {
		return nil
	}
	name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "reset_all_user_tokens")
	if err != nil || name == "" {
		return err
	}
	q.pol.note(name)
	toks, err := q.v.cfg.Tokens.ByOwner(ctx, *t.Owner)
	if err != nil {
		return err
	}
	for _, o := range toks {
		if o.FailCount > 0 && !o.Locked {
			if _, err := q.v.cfg.Tokens.Reset(ctx, o.Serial); err != nil {
				return err
			}
		}
	}
	return nil
}

// answer checks a challenge answer: only tokens holding a challenge of the
// transaction are asked, with the password as OTP.
func (q *req) answer(ctx context.Context, usable, all []*token.Token) (Response, error) {
	svc := q.v.cfg.Tokens
	now := q.v.cfg.Now()
	chs, err := svc.Challenges(ctx, token.ChallengeFilter{TransactionID: q.r.TransactionID, IncludeExpired: true})
	if err != nil {
		return Response{}, err
	}
	if res, ok, err := q.pinResetAnswer(ctx, usable, chs); err != nil || ok {
		return res, err
	}
	bySerial := map[string]*token.Challenge{}
	for i := range chs {
		bySerial[chs[i].Serial] = &chs[i]
	}
	var responders []*token.Token
	for _, t := range usable {
		if _, ok := bySerial[t.Serial]; ok {
			responders = append(responders, t)
		}
	}
	if len(responders) == 0 {
		if res, ok, err := q.enrollAnswer(ctx, all, bySerial); ok || err != nil {
			return res, err
		}
		for _, t := range all {
			if err := svc.Fail(ctx, t.Serial, true); err != nil {
				return Response{}, err
			}
		}
		return Response{User: q.u, Message: MsgWrongPIN}, nil
	}
	for _, t := range responders {
		ch := bySerial[t.Serial]
		if !now.Before(ch.Expiration) {
			continue
		}
		m, err := svc.Verify(ctx, t, q.r.Pass, q.r.Options, ch)
		if err != nil && !errors.Is(err, token.ErrCorrupt) {
			return Response{}, err
		}
		if !m.OK {
			continue
		}
		committed, stale, err := q.commit(ctx, t, m, MsgFoundChallenge)
		if errors.Is(err, token.ErrReplay) {
			continue
		}
		var ue *token.UnusableError
		if errors.As(err, &ue) {
			continue
		}
		if err != nil {
			return Response{}, err
		}
		if _, err := svc.DeleteTransaction(ctx, q.r.TransactionID); err != nil {
			return Response{}, err
		}
		if err := q.resetAll(ctx, committed); err != nil {
			return Response{}, err
		}
		return q.success(MsgFoundChallenge, committed, stale), nil
	}
	for _, t := range responders {
		if err := svc.ChallengeAnswered(ctx, q.r.TransactionID, t.Serial, false); err != nil {
			return Response{}, err
		}
		if err := svc.Fail(ctx, t.Serial, true); err != nil {
			return Response{}, err
		}
	}
	if len(responders) == 1 {
		return Response{User: q.u, Message: MsgResponseNoMatch, Serial: responders[0].Serial, Type: responders[0].Type}, nil
	}
	return Response{User: q.u, Message: fmt.Sprintf(MsgResponseNoMatchN, len(responders))}, nil
}

// challenge triggers a challenge for each token whose PIN was the whole
// password, all under one transaction id.
func (q *req) challenge(ctx context.Context, cands []*candidate) (Response, error) {
	toks := make([]*token.Token, len(cands))
	for i, c := range cands {
		toks[i] = c.t
	}
	return q.trigger(ctx, toks)
}

// challengeOptions are the AUTH actions handed to the token types when
// they make a challenge.
var challengeOptions = []string{"emailtext", "emailsubject", "smstext", "email_challenge_text", "sms_challenge_text", "indexedsecret_challenge_text", "indexedsecret_count"}

// trigger creates the challenges of toks and builds the response.
func (q *req) trigger(ctx context.Context, toks []*token.Token) (Response, error) {
	svc := q.v.cfg.Tokens
	txid, err := svc.NewTransactionID()
	if err != nil {
		return Response{}, err
	}
	text, err := q.pol.value(ctx, policy.ScopeAuthentication, "challenge_text")
	if err != nil {
		return Response{}, err
	}
	incFail, err := q.pol.flag(ctx, policy.ScopeAuthentication, "increase_failcounter_on_challenge")
	if err != nil {
		return Response{}, err
	}
	// Only policies shape a challenge: the texts, the mail subject, the
	// validity and the server to send through never come from the
	// (anonymous) request.
	opts, err := q.pol.challengeOpts(ctx)
	if err != nil {
		return Response{}, err
	}
	info := q.ownerInfo(ctx)
	var multi []Challenge
	var messages, tids []string
	var sendErr error
	for _, t := range toks {
		if svc.Unusable(t, q.v.cfg.Now()) != "" {
			continue
		}
		res, _, err := svc.CreateChallenge(ctx, t, txid, "", opts, info)
		if err != nil {
			sendErr = err
			continue
		}
		msg := res.Message
		if !svc.Types().ChallengesOnPIN(t.Type) {
			// <type>_challenge_text wins over challenge_text.
			own, err := q.pol.value(ctx, policy.ScopeAuthentication, t.Type+"_challenge_text")
			if err != nil {
				return Response{}, err
			}
			switch {
			case own != "":
				msg = own
			case text != "":
				msg = text
			}
		}
		ch := Challenge{TransactionID: txid, Serial: t.Serial, Type: t.Type, ClientMode: res.ClientMode, Message: msg}
		if len(res.Attributes) > 0 {
			ch.Attributes = res.Attributes
		}
		multi = append(multi, ch)
		if !slices.Contains(messages, msg) {
			messages = append(messages, msg)
		}
		tids = append(tids, txid)
		if incFail != "" {
			q.pol.note(incFail)
			if err := svc.Fail(ctx, t.Serial, false); err != nil {
				return Response{}, err
			}
		}
	}
	if len(multi) == 0 {
		if sendErr != nil {
			return Response{User: q.u, SendFailed: true, Message: sendErr.Error()}, sendErrIfInternal(sendErr)
		}
		return Response{User: q.u, Message: MsgNoActiveCR}, nil
	}
	res := challengeAnswer(q.u, multi, strings.Join(messages, ", "), tids)
	if err := q.challengeShape(ctx, &res); err != nil {
		return Response{}, err
	}
	return res, nil
}

// challengeAnswer is the answer with the challenges multi (the last one
// gives the top-level serial, type, client mode, attributes and image).
func challengeAnswer(u user.User, multi []Challenge, msg string, tids []string) Response {
	last := multi[len(multi)-1]
	all := make([]string, len(multi))
	for i, c := range multi {
		all[i] = c.Message
	}
	return Response{
		User: u, Challenge: true, Message: msg, Messages: all, Challenges: multi,
		TransactionID: last.TransactionID, TransactionIDs: tids,
		Serial: last.Serial, Type: last.Type, ClientMode: last.ClientMode,
		Attributes: last.Attributes, Image: last.Image, Link: last.Link,
	}
}

// sendErrIfInternal keeps coded send errors out of the error path (they
// become the detail message); others are returned.
func sendErrIfInternal(err error) error {
	if _, ok := errors.AsType[*apierr.Error](err); ok {
		return nil
	}
	return err
}

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
	var q *req
	var res Response
	err := v.pre(ctx, a)
	if err == nil {
		q, res, err = v.trigger(ctx, r, a)
	}
	res, err = a.finish(ctx, q, res, err)
	v.post(ctx, a, err)
	return res, err
}

func (v *Validator) trigger(ctx context.Context, r Request, a *auditor) (*req, Response, error) {
	if r.Serial == "" && r.User == "" {
		return nil, Response{}, ErrNoTarget
	}
	q, err := v.start(ctx, r, a)
	if err != nil {
		return q, Response{}, err
	}
	if r.User != "" && !q.found {
		return q, Response{}, ErrTriggerNoUser
	}
	var toks []*token.Token
	if r.Serial != "" {
		t, err := v.cfg.Tokens.Get(ctx, r.Serial)
		if err != nil {
			return q, Response{}, err
		}
		if r.User == "" && t.Assigned() {
			q.u, q.found = *t.Owner, true
		}
		toks = []*token.Token{t}
	} else {
		if toks, err = v.cfg.Tokens.ByOwner(ctx, q.u); err != nil {
			return q, Response{}, err
		}
		if toks, err = q.filterType(ctx, toks); err != nil {
			return q, Response{}, err
		}
	}
	types := v.cfg.Tokens.Types()
	toks = slices.DeleteFunc(toks, func(t *token.Token) bool { return types.NeverChallenges(t.Type) || t.Revoked })
	res, err := q.trigger(ctx, toks)
	if err != nil {
		return q, res, err
	}
	if len(res.Challenges) == 0 {
		out := Response{User: res.User, SendFailed: res.SendFailed, Messages: []string{}}
		if res.SendFailed {
			out.Messages = []string{res.Message}
		}
		res = out
	}
	return q, res, q.pol.authorized(ctx)
}

// Poll is /validate/polltransaction: Value is true once a challenge of
// r.TransactionID was answered correctly and not yet used. It writes its
// audit entry.
func (v *Validator) Poll(ctx context.Context, r Request) (Response, error) {
	a := v.newAuditor(r, ActionPoll, EventPoll, false)
	var res Response
	err := v.pre(ctx, a)
	if err == nil {
		res, err = v.poll(ctx, r)
	}
	res, err = a.finish(ctx, nil, res, err)
	v.post(ctx, a, err)
	return res, err
}

func (v *Validator) poll(ctx context.Context, r Request) (Response, error) {
	txid := strings.TrimSpace(r.TransactionID)
	if txid == "" {
		return Response{}, apierr.MissingParameter("transaction_id")
	}
	chs, err := v.cfg.Tokens.Challenges(ctx, token.ChallengeFilter{TransactionID: txid})
	if err != nil {
		return Response{}, err
	}
	ok := false
	for _, ch := range chs {
		ok = ok || ch.OTPValid
	}
	res := Response{Value: ok, ChallengeStatus: "pending"}
	if ok {
		res.ChallengeStatus = "accept"
	}
	return res, nil
}
