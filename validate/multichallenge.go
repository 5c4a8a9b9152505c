package validate

import (
	"context"
	"encoding/json"
	"time"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// Messages of the generic challenges (AUTH resync_via_multichallenge and
// change_pin_via_validate), as privacyIDEA words them.
const (
	MsgResyncChallenge = "To resync your token, please enter the next OTP value"
	MsgNewPIN          = "Please enter a new PIN"
	MsgNewPINAgain     = "Please enter the new PIN again"
	MsgPINSet          = "PIN successfully set."
	MsgPINsDiffer      = "PINs do not match"
)

// genericChallenge stores a challenge of kind for t under a new
// transaction id and answers with it (value false, one interactive
// challenge).
func (q *req) genericChallenge(ctx context.Context, t *token.Token, kind, msg string, data []byte) (Response, error) {
	svc := q.v.cfg.Tokens
	txid, err := svc.NewTransactionID()
	if err != nil {
		return Response{}, err
	}
	if _, err := svc.CreateGenericChallenge(ctx, t, txid, kind, data); err != nil {
		return Response{}, err
	}
	ch := Challenge{TransactionID: txid, Serial: t.Serial, Type: t.Type, ClientMode: "interactive", Message: msg}
	res := challengeAnswer(q.u, []Challenge{ch}, msg, []string{txid})
	if err := q.challengeShape(ctx, &res); err != nil {
		return Response{}, err
	}
	return res, nil
}

// resyncChallenge is AUTH resync_via_multichallenge: the first value of
// an AutoResync was remembered for t (its PIN was right), and instead of
// "wrong otp value" the user is asked for the next value. ok is false
// when the policy is not set.
func (q *req) resyncChallenge(ctx context.Context, t *token.Token) (Response, bool, error) {
	name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "resync_via_multichallenge")
	if err != nil || name == "" {
		return Response{}, false, err
	}
	q.pol.note(name)
	res, err := q.genericChallenge(ctx, t, token.ChallengeResync, MsgResyncChallenge, nil)
	return res, true, err
}

// pinChange is AUTH change_pin_via_validate: a success of a token whose
// PIN change is due becomes a challenge asking for a new PIN.
func (q *req) pinChange(ctx context.Context, res Response, t *token.Token) (Response, error) {
	if !res.Value || !res.PINChange {
		return res, nil
	}
	name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "change_pin_via_validate")
	if err != nil || name == "" {
		return res, err
	}
	q.pol.note(name)
	return q.genericChallenge(ctx, t, token.ChallengePINReset, MsgNewPIN, nil)
}

// pinResetData is the sealed data of the second PIN reset challenge: the
// hash of the new PIN given first (never the PIN itself).
type pinResetData struct {
	PINHash string `json:"pin_hash"`
}

// pinResetAnswer answers a PIN reset challenge of one of the usable
// tokens: the first answer is the new PIN, checked against the PIN
// rules and asked for again under a new transaction; the second must be
// the same PIN, which then becomes the token's PIN. ok is false when the
// transaction holds no (unexpired) PIN reset challenge of those tokens.
func (q *req) pinResetAnswer(ctx context.Context, usable []*token.Token, chs []token.Challenge) (Response, bool, error) {
	now := q.v.cfg.Now()
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
	svc := q.v.cfg.Tokens
	data, err := svc.OpenChallengeData(ch)
	if err != nil {
		return Response{}, true, err
	}
	gone := Response{User: q.u, Message: MsgResponseNoMatch, Serial: t.Serial, Type: t.Type}
	if len(data) == 0 {
		// The new PIN, the first time.
		if err := q.pol.checkNewPIN(ctx, t, q.r.Pass); err != nil {
			return Response{}, true, err
		}
		h, err := svc.HashPIN(ctx, q.r.Pass)
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
		res, err := q.genericChallenge(ctx, t, token.ChallengePINReset, MsgNewPINAgain, raw)
		return res, true, err
	}
	var d pinResetData
	if err := json.Unmarshal(data, &d); err != nil {
		return Response{}, true, err
	}
	same, err := svc.CheckPIN(ctx, &token.Token{Serial: t.Serial, PIN: d.PINHash}, q.r.Pass)
	if err != nil {
		return Response{}, true, err
	}
	if !same {
		if err := svc.ChallengeAnswered(ctx, ch.TransactionID, t.Serial, false); err != nil {
			return Response{}, true, err
		}
		return Response{User: q.u, Message: MsgPINsDiffer, Serial: t.Serial}, true, nil
	}
	next, err := q.pol.nextPINChange(ctx, now)
	if err != nil {
		return Response{}, true, err
	}
	ok, err := svc.FinishPINChange(ctx, ch.TransactionID, t.Serial, d.PINHash, next)
	if err != nil || !ok {
		return gone, true, err
	}
	return Response{Value: true, User: q.u, Message: MsgPINSet, Serial: t.Serial}, true, nil
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
