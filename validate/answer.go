package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// responder checks the answer to a challenge (a transaction id with the
// password): the new PIN of change_pin_via_validate, the first OTP of an
// enrollment via multichallenge, or the OTP of a challenged token.
type responder struct {
	v   *Validator
	r   *Request
	t   *target
	pol *policies
	com *committer
	ch  *challenger
	kdf *kdfMeter
}

// answer checks a challenge answer: only tokens holding a challenge of the
// transaction are asked, with the password as OTP.
func (rs *responder) answer(ctx context.Context, usable, all []*token.Token) (Response, error) {
	svc := rs.v.cfg.Tokens
	now := rs.v.cfg.Now()
	chs, err := svc.Challenges(ctx, token.ChallengeFilter{TransactionID: rs.r.TransactionID, IncludeExpired: true})
	if err != nil {
		return Response{}, err
	}
	if res, ok, err := rs.pinReset(ctx, usable, chs); err != nil || ok {
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
		if res, ok, err := rs.enrollment(ctx, all, bySerial); ok || err != nil {
			return res, err
		}
		if svc.Settings().NoIncFailCountOnFalsePin {
			// IncFailCountOnFalsePin off: no token holds the transaction.
			return Response{User: rs.t.u, Message: MsgWrongPIN}, nil
		}
		for _, t := range all {
			if err := svc.Fail(ctx, t.Serial, true); err != nil {
				return Response{}, err
			}
		}
		return Response{User: rs.t.u, Message: MsgWrongPIN}, nil
	}
	for _, t := range responders {
		ch := bySerial[t.Serial]
		if !now.Before(ch.Expiration) {
			continue
		}
		m, err := svc.Verify(ctx, t, rs.r.Pass, rs.r.Options, ch)
		rs.kdf.note(m.Hashed)
		if err != nil && !errors.Is(err, token.ErrCorrupt) {
			return Response{}, err
		}
		if !m.OK {
			continue
		}
		committed, stale, err := rs.com.commit(ctx, t, m, MsgFoundChallenge)
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
		if _, err := svc.DeleteTransaction(ctx, rs.r.TransactionID); err != nil {
			return Response{}, err
		}
		if err := rs.com.resetAll(ctx, committed); err != nil {
			return Response{}, err
		}
		return rs.com.success(MsgFoundChallenge, committed, stale), nil
	}
	for _, t := range responders {
		if err := svc.ChallengeAnswered(ctx, rs.r.TransactionID, t.Serial, false); err != nil {
			return Response{}, err
		}
		if err := svc.Fail(ctx, t.Serial, true); err != nil {
			return Response{}, err
		}
	}
	if len(responders) == 1 {
		return Response{User: rs.t.u, Message: MsgResponseNoMatch, Serial: responders[0].Serial, Type: responders[0].Type}, nil
	}
	return Response{User: rs.t.u, Message: fmt.Sprintf(MsgResponseNoMatchN, len(responders))}, nil
}

// pinResetData is the sealed data of the second PIN reset challenge: the
// hash of the new PIN given first (never the PIN itself).
type pinResetData struct {
	PINHash string `json:"pin_hash"`
}

// pinReset answers a PIN reset challenge of one of the usable
// tokens: the first answer is the new PIN, checked against the PIN
// rules and asked for again under a new transaction; the second must be
// the same PIN, which then becomes the token's PIN. ok is false when the
// transaction holds no (unexpired) PIN reset challenge of those tokens.
func (rs *responder) pinReset(ctx context.Context, usable []*token.Token, chs []token.Challenge) (Response, bool, error) {
	now := rs.v.cfg.Now()
	var ch *token.Challenge
	var t *token.Token
	for i := range chs {
		if chs[i].Challenge != token.ChallengePINReset || !now.Before(chs[i].Expiration) {
			continue
		}
		for _, u := range usable {
			if u.Serial == chs[i].Serial {
				ch, t = &chs[i], u
			}
		}
	}
	if ch == nil {
		return Response{}, false, nil
	}
	svc := rs.v.cfg.Tokens
	data, err := svc.OpenChallengeData(ch)
	if err != nil {
		return Response{}, true, err
	}
	gone := Response{User: rs.t.u, Message: MsgResponseNoMatch, Serial: t.Serial, Type: t.Type}
	if len(data) == 0 {
		// The new PIN, the first time.
		if err := rs.pol.checkNewPIN(ctx, t, rs.r.Pass); err != nil {
			return Response{}, true, err
		}
		rs.kdf.note(rs.r.Pass != "")
		h, err := svc.HashPIN(ctx, rs.r.Pass)
		if err != nil {
			return Response{}, true, err
		}
		raw, err := json.Marshal(pinResetData{PINHash: h})
		if err != nil {
			return Response{}, true, err
		}
		if n, err := svc.DeleteTransaction(ctx, ch.TransactionID); err != nil || n == 0 {
			// n == 0: a parallel answer took the challenge.
			return gone, true, err
		}
		res, err := rs.ch.generic(ctx, t, token.ChallengePINReset, MsgNewPINAgain, raw)
		return res, true, err
	}
	var d pinResetData
	if err := json.Unmarshal(data, &d); err != nil {
		return Response{}, true, err
	}
	first := &token.Token{Serial: t.Serial, PIN: d.PINHash}
	rs.kdf.note(first.PINHashed())
	same, err := svc.CheckPIN(ctx, first, rs.r.Pass)
	if err != nil {
		return Response{}, true, err
	}
	if !same {
		if err := svc.ChallengeAnswered(ctx, ch.TransactionID, t.Serial, false); err != nil {
			return Response{}, true, err
		}
		return Response{User: rs.t.u, Message: MsgPINsDiffer, Serial: t.Serial}, true, nil
	}
	next, err := rs.pol.nextPINChange(ctx, now)
	if err != nil {
		return Response{}, true, err
	}
	ok, err := svc.FinishPINChange(ctx, ch.TransactionID, t.Serial, d.PINHash, next)
	if err != nil || !ok {
		return gone, true, err
	}
	return Response{Value: true, User: rs.t.u, Message: MsgPINSet, Serial: t.Serial}, true, nil
}

// enrollment answers the challenge of an enrollment via multichallenge:
// all are the user's tokens, bySerial the challenges of the transaction.
// ok is false when the transaction is no such enrollment. The token is
// checked with the password as OTP; a match commits it as enrolled (in
// the same transaction as the OTP's use) and authenticates; a mismatch
// counts as a failure of the token, which stays in clientwait.
func (rs *responder) enrollment(ctx context.Context, all []*token.Token, bySerial map[string]*token.Challenge) (Response, bool, error) {
	svc := rs.v.cfg.Tokens
	var t *token.Token
	var ch *token.Challenge
	for _, c := range all {
		if x, ok := bySerial[c.Serial]; ok && (x.Session == sessionEnroll || x.Session == sessionEnrollOptional) && pendingEnrollment(c) {
			t, ch = c, x
			break
		}
	}
	if t == nil {
		return Response{}, false, nil
	}
	if rs.v.cfg.Now().Before(ch.Expiration) {
		m, err := svc.Verify(ctx, t, rs.r.Pass, rs.r.Options, ch)
		rs.kdf.note(m.Hashed)
		if err != nil && !errors.Is(err, token.ErrCorrupt) {
			return Response{}, true, err
		}
		if m.OK {
			m.Rollout = true
			committed, stale, err := rs.com.commit(ctx, t, m, MsgFoundChallenge)
			var ue *token.UnusableError
			switch {
			case errors.Is(err, token.ErrReplay), errors.As(err, &ue):
			case err != nil:
				return Response{}, true, err
			default:
				if _, err := svc.DeleteTransaction(ctx, rs.r.TransactionID); err != nil {
					return Response{}, true, err
				}
				zerolog.Ctx(ctx).Info().Str("component", "validate").Str("user", rs.t.u.Login).Str("realm", rs.t.u.Realm).
					Str("serial", t.Serial).Msg("enroll_via_multichallenge: the new token is enrolled")
				if err := rs.com.resetAll(ctx, committed); err != nil {
					return Response{}, true, err
				}
				return rs.com.success(MsgFoundChallenge, committed, stale), true, nil
			}
		}
	}
	if err := svc.ChallengeAnswered(ctx, rs.r.TransactionID, t.Serial, false); err != nil {
		return Response{}, true, err
	}
	if err := svc.Fail(ctx, t.Serial, true); err != nil {
		return Response{}, true, err
	}
	return Response{User: rs.t.u, Message: MsgResponseNoMatch, Serial: t.Serial, Type: t.Type}, true, nil
}

// checkNewPIN applies the user-scope PIN rules (otp_pin_minlength,
// otp_pin_maxlength, otp_pin_contents, the <type>_ variants first) to a
// PIN the user chose: the user sets it, as in /token/setpin of the user
// role.
func (p *policies) checkNewPIN(ctx context.Context, t *token.Token, pin string) error {
	return policy.CheckPINRules(t.Type, pin, func(action string) (string, error) {
		return p.value(ctx, policy.ScopeUser, action)
	})
}

// nextPINChange is when the new PIN must be changed again: ENROLL
// change_pin_every ("90d") after now, or zero when no policy asks for it.
func (p *policies) nextPINChange(ctx context.Context, now time.Time) (time.Time, error) {
	v, name, err := p.valueNamed(ctx, policy.ScopeEnrollment, "change_pin_every")
	if err != nil || v == "" {
		return time.Time{}, err
	}
	d, ok := token.ParsePINChangeEvery(v)
	if !ok {
		return time.Time{}, errPolicyValue("change_pin_every", v)
	}
	p.note(name)
	return now.Add(d), nil
}
