package validate

import (
	"context"
	"fmt"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// commit records a successful match through the token service. In the
// same transaction it writes tokeninfo last_auth, and applies the AUTHZ
// last_auth policy to the value it finds there: when that is too old the
// OTP is still used up but last_auth is left as it was, and stale returns
// it for the rejection message.
func (q *req) commit(ctx context.Context, snapshot *token.Token, m token.Match, msg string) (t *token.Token, stale string, err error) {
	serial := snapshot.Serial
	maxAge, name, err := q.pol.lastAuthMax(ctx)
	if err != nil {
		return nil, "", err
	}
	now := q.v.cfg.Now()
	stamp := now.Format(lastAuthLayout)
	inner := m.Apply
	var tooOld bool
	m.Apply = func(t *token.Token) bool {
		tooOld, stale = false, ""
		if inner != nil && !inner(t) {
			return false
		}
		if prev, ok := t.Info[token.InfoLastAuth]; ok && maxAge > 0 && !lastAuthFresh(prev, maxAge, now) {
			tooOld, stale = true, prev
			return true
		}
		t.SetInfo(token.InfoLastAuth, stamp)
		return true
	}
	var wrote bool
	if write, err := q.recordWrite(ctx, msg, snapshot); err != nil {
		return nil, "", err
	} else if write != nil {
		m.Also = func(tx store.Tx, _ *token.Token) error {
			wrote = false
			if tooOld {
				return nil
			}
			if err := write(tx); err != nil {
				return err
			}
			wrote = true
			return nil
		}
	}
	t, err = q.v.cfg.Tokens.Commit(ctx, serial, m)
	if err != nil {
		return nil, "", err
	}
	q.a.written = wrote
	if tooOld {
		q.pol.note(name)
		return t, stale, nil
	}
	return t, "", nil
}

// recordWrite is the write of the audit entry (and authentication
// record) of the success that committing snapshot with msg gives, or nil
// when the response could still change after the commit: an
// authorization policy (serial, tokentype, tokeninfo, last_auth,
// authorized, the rate limits, the detail shaping), reset_all_user_tokens,
// enroll_via_multichallenge, client_mode_per_user or a due PIN change is
// in effect.
func (q *req) recordWrite(ctx context.Context, msg string, snapshot *token.Token) (func(store.Tx) error, error) {
	if q.a == nil || (q.pol.snap != nil && q.pol.snap.Active(policy.ScopeAuthorization)) {
		return nil, nil
	}
	if snapshot.Assigned() {
		if name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "reset_all_user_tokens"); err != nil || name != "" {
			return nil, err
		}
	}
	// enroll_via_multichallenge may turn the success into a challenge.
	if v, err := q.pol.value(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge"); err != nil || v != "" {
		return nil, err
	}
	// client_mode_per_user notes its policy after the commit.
	if name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "client_mode_per_user"); err != nil || name != "" {
		return nil, err
	}
	if _, _, due := token.PINChangeDue(snapshot, q.v.cfg.Now()); due {
		// change_pin_via_validate may turn the success into a challenge.
		return nil, nil
	}
	return q.a.inTx(q.success(msg, snapshot, ""), q.pol.used, q), nil
}

// fail raises the fail counters (and count_auth) of the candidates in one
// transaction, with what AutoResync remembers, and answers res. When record
// is set, the audit entry of res is written in that transaction when
// nothing after it can change res (see recordWrite; a failure's detail is
// also replaced under hide_specific_error_message), so that a rejection
// costs one commit, not two.
func (q *req) fail(ctx context.Context, cands []*candidate, res Response, record bool) (Response, error) {
	var write func(store.Tx) error
	if record {
		var err error
		if write, err = q.failRecord(ctx, res); err != nil {
			return Response{}, err
		}
	}
	fails := make([]token.Failure, len(cands))
	for i, c := range cands {
		fails[i] = token.Failure{Serial: c.t.Serial, Change: c.m.Remember}
	}
	if err := q.v.cfg.Tokens.FailAll(ctx, fails, true, write); err != nil {
		return Response{}, err
	}
	if write != nil {
		q.a.written = true
	}
	return res, nil
}

// failRecord is the write of the audit entry of the failure res, or nil
// when the response could still change after the fail counters were
// written.
func (q *req) failRecord(ctx context.Context, res Response) (func(store.Tx) error, error) {
	if q.a == nil || (q.pol.snap != nil && q.pol.snap.Active(policy.ScopeAuthorization)) {
		return nil, nil
	}
	if name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "hide_specific_error_message"); err != nil || name != "" {
		return nil, err
	}
	return q.a.inTx(res, q.pol.used, q), nil
}

// success is the decision after a committed match: a success, or the
// last_auth rejection.
func (q *req) success(msg string, t *token.Token, stale string) Response {
	res := Response{User: q.u}
	res.setToken(msg, t)
	if stale != "" {
		res.Message = fmt.Sprintf("The last successful authentication was %s. It is too long ago.", stale)
		return res
	}
	res.Value = true
	if msg != MsgFoundChallenge {
		if v, set, due := token.PINChangeDue(t, q.v.cfg.Now()); set {
			res.NextPINChange, res.PINChange = v, due
		}
	}
	return res
}
