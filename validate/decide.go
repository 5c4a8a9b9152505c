package validate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// candidate is a token under consideration with its split password.
type candidate struct {
	t        *token.Token
	pin, otp string
	m        token.Match
}

// split divides pass into PIN and OTP for t: PIN first and the OTP the
// last otplen characters, or under appendPIN (the system setting
// PrependPin false) the OTP the first otplen characters and the PIN the
// rest. ok is false when pass is shorter than otplen.
func split(t *token.Token, pass string, pinOnly, appendPIN bool) (pin, otp string, ok bool) {
	if pinOnly {
		return pass, "", true
	}
	r := []rune(pass)
	if len(r) < t.OTPLen {
		return "", "", false
	}
	if appendPIN {
		return string(r[t.OTPLen:]), string(r[:t.OTPLen]), true
	}
	return string(r[:len(r)-t.OTPLen]), string(r[len(r)-t.OTPLen:]), true
}

// pinChecker checks PIN parts under the otppin policy, each user store
// password and each token's PIN value at most once per request (a wrong
// PIN before a right OTP is checked in both phases of the decision, and
// must cost no more than before a wrong OTP).
type pinChecker struct {
	v    *Validator
	t    *target
	kdf  *kdfMeter
	mode string
	memo map[string]bool
	// tokenMemo holds the answers of token PIN checks by serial and
	// value.
	tokenMemo map[[2]string]bool
	// upgrades are the new hashes of PINs that matched a hash of other
	// parameters, by serial: the old hash and the new one (see
	// token.Service.CheckPINUpgrade).
	upgrades map[string][2]string
}

// upgrade makes m's write also store the upgraded PIN hash of t, if its
// PIN check found one.
func (p *pinChecker) upgrade(t *token.Token, m *token.Match) {
	u, ok := p.upgrades[t.Serial]
	if !ok {
		return
	}
	inner := m.Apply
	m.Apply = func(cur *token.Token) bool {
		if inner != nil && !inner(cur) {
			return false
		}
		token.UpgradePIN(cur, u[0], u[1])
		return true
	}
}

func (p *pinChecker) check(ctx context.Context, t *token.Token, pin string) (bool, error) {
	switch p.mode {
	case "none":
		return pin == "", nil
	case "userstore":
		if !t.Assigned() {
			return false, nil
		}
		in, err := p.t.ownerStore(ctx, t.Owner.Resolver)
		if err != nil {
			return false, err
		}
		if in == nil {
			return false, nil
		}
		if v, ok := p.memo[pin]; ok {
			return v, nil
		}
		ok, err := in.CheckPassword(ctx, p.t.u.UID, pin)
		if err != nil {
			return false, err
		}
		p.memo[pin] = ok
		return ok, nil
	}
	key := [2]string{t.Serial, pin}
	if v, ok := p.tokenMemo[key]; ok {
		return v, nil
	}
	p.kdf.note(t.PINHashed())
	ok, upgraded, err := p.v.cfg.Tokens.CheckPINUpgrade(ctx, t, pin)
	if err != nil {
		return false, err
	}
	if upgraded != "" {
		if p.upgrades == nil {
			p.upgrades = map[string][2]string{}
		}
		p.upgrades[t.Serial] = [2]string{t.PIN, upgraded}
	}
	if p.tokenMemo == nil {
		p.tokenMemo = map[[2]string]bool{}
	}
	p.tokenMemo[key] = ok
	return ok, nil
}

// decider runs privacyIDEA's check_token_list over a request's candidate
// tokens: it splits the password into PIN and OTP per token, checks the
// OTPs first and the PIN only of a token whose OTP matched, and turns a
// PIN alone into challenges and anything else into the failure of the
// tokens whose PIN was right (or of all).
type decider struct {
	v    *Validator
	r    *Request
	t    *target
	pol  *policies
	com  *committer
	ch   *challenger
	resp *responder
	kdf  *kdfMeter
}

// otpOnly checks only the OTP of the serial's token t (otponly).
func (d *decider) otpOnly(ctx context.Context, t *token.Token) (Response, error) {
	m, err := d.v.cfg.Tokens.Verify(ctx, t, d.r.Pass, d.r.Options, nil)
	d.kdf.note(m.Hashed)
	if err != nil && !errors.Is(err, token.ErrCorrupt) {
		return Response{}, err
	}
	if m.OK {
		// Commit still refuses a disabled or blocked token (privacyIDEA
		// skips those checks for otponly; we do not let a disabled
		// token authenticate).
		committed, stale, err := d.com.commit(ctx, t, m, MsgMatching1())
		if err == nil {
			return d.com.success(MsgMatching1(), committed, stale), nil
		}
		if _, ok := errors.AsType[*token.UnusableError](err); !ok && !errors.Is(err, token.ErrReplay) {
			return Response{}, err
		}
	}
	return Response{User: d.t.u, Message: MsgOTPOnlyFailed}, nil
}

// decide runs privacyIDEA's check_token_list over the candidate tokens;
// force is force_challenge_response (user path only), under which PIN
// and OTP are never checked together.
func (d *decider) decide(ctx context.Context, all []*token.Token, force bool) (Response, error) {
	svc := d.v.cfg.Tokens
	now := d.v.cfg.Now()
	var toks []*token.Token
	for _, t := range all {
		if !t.Revoked {
			toks = append(toks, t)
		}
	}
	if len(toks) == 0 {
		return Response{}, ErrAllRevoked
	}
	if v, err := d.pol.value(ctx, policy.ScopeAuthentication, "disabled_token_types"); err != nil {
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
		return Response{User: d.t.u, Message: MsgNoSuitable}, nil
	}
	if d.r.TransactionID != "" {
		return d.resp.answer(ctx, usable, toks)
	}
	if len(usable) == 0 {
		return Response{User: d.t.u, Message: strings.Join(reasons, ", ")}, nil
	}

	mode, err := d.otppin(ctx, usable)
	if err != nil {
		return Response{}, err
	}
	pc := &pinChecker{v: d.v, t: d.t, kdf: d.kdf, mode: strings.ToLower(mode), memo: map[string]bool{}}
	set := svc.Settings()
	// Phase 1: the OTP decides which token's PIN is worth a key derivation.
	// Under force_challenge_response PIN and OTP are never checked
	// together.
	cands := make([]*candidate, 0, len(usable))
	for _, t := range usable {
		pinOnly := isPINOnly(svc, t)
		pin, otp, ok := split(t, d.r.Pass, pinOnly, set.AppendPIN)
		c := &candidate{t: t, pin: pin, otp: otp}
		cands = append(cands, c)
		if !ok || force {
			continue
		}
		m, err := svc.Verify(ctx, t, otp, d.r.Options, nil)
		d.kdf.note(m.Hashed)
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
		pc.upgrade(c.t, &c.m)
		committed, stale, err := d.com.commit(ctx, c.t, c.m, fmt.Sprintf(MsgMatching, 1))
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
		if err := d.com.resetAll(ctx, committed); err != nil {
			return Response{}, err
		}
		return d.ch.pinChange(ctx, d.com.success(fmt.Sprintf(MsgMatching, 1), committed, stale), committed)
	}

	// Phase 2: no success. PIN alone → challenge; PIN right → wrong OTP.
	crTypes, err := d.pol.value(ctx, policy.ScopeAuthentication, "challenge_response")
	if err != nil {
		return Response{}, err
	}
	crList := strings.Fields(strings.ToLower(crTypes))
	var challengeReq, pinMatched []*candidate
	for _, c := range cands {
		if canChallenge(svc.Types(), c.t, crList) {
			ok, err := pc.check(ctx, c.t, d.r.Pass)
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
		if _, _, fits := split(c.t, d.r.Pass, false, set.AppendPIN); fits && !isPINOnly(svc, c.t) && !force {
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
		toks := make([]*token.Token, len(challengeReq))
		for i, c := range challengeReq {
			toks[i] = c.t
		}
		return d.ch.trigger(ctx, toks)
	}
	if len(pinMatched) > 0 {
		msg := token.MsgWrongOTP
		res := Response{User: d.t.u, Message: msg}
		if len(pinMatched) == 1 {
			if pinMatched[0].m.Message == token.MsgReplayed {
				msg = token.MsgReplayed
			}
			res.setToken(msg, pinMatched[0].t)
		}
		if len(pinMatched) != 1 || pinMatched[0].m.Remember == nil {
			return d.com.fail(ctx, pinMatched, res, true)
		}
		// AutoResync remembers the first value: a resync challenge may
		// answer instead, so the caller records the outcome.
		if _, err := d.com.fail(ctx, pinMatched, res, false); err != nil {
			return Response{}, err
		}
		if ch, ok, err := d.ch.resync(ctx, pinMatched[0].t); err != nil || ok {
			return ch, err
		}
		return res, nil
	}
	res := Response{User: d.t.u, Message: MsgWrongPIN}
	if set.NoIncFailCountOnFalsePin {
		// IncFailCountOnFalsePin off: no PIN matched, so the tokens are
		// left as they are.
		return res, nil
	}
	for _, c := range cands {
		// AutoResync remembers a value only after the right PIN.
		c.m.Remember = nil
	}
	return d.com.fail(ctx, cands, res, true)
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

// otppin is the otppin policy's value for the request. The serial of a
// token without an owner is matched as privacyIDEA matches it: as a user
// without a name in the token's first realm (token realms are kept in
// name order; privacyIDEA takes the one it stored first), so that the
// otppin policy of that realm applies (and only policies that name no
// user and no resolver); without a token realm, as the empty user.
func (d *decider) otppin(ctx context.Context, usable []*token.Token) (string, error) {
	if u := *d.pol.u; u.Login == "" && u.Realm == "" && u.Resolver == "" &&
		len(usable) == 1 && !usable[0].Assigned() && len(usable[0].Realms) > 0 {
		return d.pol.valueAs(ctx, policy.ScopeAuthentication, "otppin", usable[0].Realms[0])
	}
	return d.pol.value(ctx, policy.ScopeAuthentication, "otppin")
}
