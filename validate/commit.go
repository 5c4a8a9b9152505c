package validate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// committer writes the outcome of a decision to the tokens: the use of a
// match with its last_auth, the fail counters, and reset_all_user_tokens
// after a success, each with the request's audit entry in the same
// transaction when nothing after it can change the answer.
type committer struct {
	v   *Validator
	t   *target
	pol *policies
	a   *auditor
}

// commit records a successful match through the token service. In the
// same transaction it writes tokeninfo last_auth, and applies the AUTHZ
// last_auth policy to the value it finds there: when that is too old the
// OTP is still used up but last_auth is left as it was, and stale returns
// it for the rejection message.
func (c *committer) commit(ctx context.Context, snapshot *token.Token, m token.Match, msg string) (t *token.Token, stale string, err error) {
	serial := snapshot.Serial
	maxAge, name, err := c.pol.lastAuthMax(ctx)
	if err != nil {
		return nil, "", err
	}
	now := c.v.cfg.Now()
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
	if write, err := c.recordWrite(ctx, msg, snapshot); err != nil {
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
	t, err = c.v.cfg.Tokens.Commit(ctx, serial, m)
	if err != nil {
		return nil, "", err
	}
	c.a.written = wrote
	if tooOld {
		c.pol.note(name)
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
func (c *committer) recordWrite(ctx context.Context, msg string, snapshot *token.Token) (func(store.Tx) error, error) {
	if c.a == nil || (c.pol.snap != nil && c.pol.snap.Active(policy.ScopeAuthorization)) {
		return nil, nil
	}
	if snapshot.Assigned() {
		if name, err := c.pol.flag(ctx, policy.ScopeAuthentication, "reset_all_user_tokens"); err != nil || name != "" {
			return nil, err
		}
	}
	// enroll_via_multichallenge may turn the success into a challenge.
	if v, err := c.pol.value(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge"); err != nil || v != "" {
		return nil, err
	}
	// client_mode_per_user notes its policy after the commit.
	if name, err := c.pol.flag(ctx, policy.ScopeAuthentication, "client_mode_per_user"); err != nil || name != "" {
		return nil, err
	}
	if _, _, due := token.PINChangeDue(snapshot, c.v.cfg.Now()); due {
		// change_pin_via_validate may turn the success into a challenge.
		return nil, nil
	}
	return c.a.inTx(c.success(msg, snapshot, "")), nil
}

// fail raises the fail counters (and count_auth) of the candidates in one
// transaction, with what AutoResync remembers, and answers res. When record
// is set, the audit entry of res is written in that transaction when
// nothing after it can change res (see recordWrite; a failure's detail is
// also replaced under hide_specific_error_message), so that a rejection
// costs one commit, not two.
func (c *committer) fail(ctx context.Context, cands []*candidate, res Response, record bool) (Response, error) {
	var write func(store.Tx) error
	if record {
		var err error
		if write, err = c.failRecord(ctx, res); err != nil {
			return Response{}, err
		}
	}
	fails := make([]token.Failure, len(cands))
	for i, cd := range cands {
		fails[i] = token.Failure{Serial: cd.t.Serial, Change: cd.m.Remember}
	}
	if err := c.v.cfg.Tokens.FailAll(ctx, fails, true, write); err != nil {
		return Response{}, err
	}
	if write != nil {
		c.a.written = true
	}
	return res, nil
}

// failRecord is the write of the audit entry of the failure res, or nil
// when the response could still change after the fail counters were
// written.
func (c *committer) failRecord(ctx context.Context, res Response) (func(store.Tx) error, error) {
	if c.a == nil || (c.pol.snap != nil && c.pol.snap.Active(policy.ScopeAuthorization)) {
		return nil, nil
	}
	if name, err := c.pol.flag(ctx, policy.ScopeAuthentication, "hide_specific_error_message"); err != nil || name != "" {
		return nil, err
	}
	return c.a.inTx(res), nil
}

// success is the decision after a committed match: a success, or the
// last_auth rejection.
func (c *committer) success(msg string, t *token.Token, stale string) Response {
	res := Response{User: c.t.u}
	res.setToken(msg, t)
	if stale != "" {
		res.Message = fmt.Sprintf("The last successful authentication was %s. It is too long ago.", stale)
		return res
	}
	res.Value = true
	if msg != MsgFoundChallenge {
		if v, set, due := token.PINChangeDue(t, c.v.cfg.Now()); set {
			res.NextPINChange, res.PINChange = v, due
		}
	}
	return res
}

// resetAll applies reset_all_user_tokens after a success.
func (c *committer) resetAll(ctx context.Context, t *token.Token) error {
	if !t.Assigned() {
		return nil
	}
	name, err := c.pol.flag(ctx, policy.ScopeAuthentication, "reset_all_user_tokens")
	if err != nil || name == "" {
		return err
	}
	c.pol.note(name)
	toks, err := c.v.cfg.Tokens.ByOwner(ctx, *t.Owner)
	if err != nil {
		return err
	}
	for _, o := range toks {
		if o.FailCount > 0 && !o.Locked {
			if _, err := c.v.cfg.Tokens.Reset(ctx, o.Serial); err != nil {
				return err
			}
		}
	}
	return nil
}

// Formats of the last_auth tokeninfo: written as privacyIDEA writes it
// (%Y-%m-%d %H:%M:%S.%f%z), read also in the forms Python's str() and
// isoformat() give.
const lastAuthLayout = "2006-01-02 15:04:05.000000-0700"

var lastAuthLayouts = []string{
	"2006-01-02 15:04:05.999999999-0700",
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-0700",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

// lastAuthMax returns the AUTHZ last_auth duration, if a policy sets one.
func (p *policies) lastAuthMax(ctx context.Context) (time.Duration, string, error) {
	sc, err := p.set(ctx, policy.ScopeAuthorization)
	if err != nil || sc.Empty() {
		return 0, "", err
	}
	v, names, err := unique(sc, "last_auth")
	if err != nil || v == "" {
		return 0, "", err
	}
	d, ok := parseDelta(v)
	if !ok {
		return 0, "", errPolicyValue("last_auth", v)
	}
	return d, names[0], nil
}

// lastAuthFresh reports whether a stored last_auth value is within maxAge of
// now; an unparsable value is not.
func lastAuthFresh(stored string, maxAge time.Duration, now time.Time) bool {
	for _, l := range lastAuthLayouts {
		if t, err := time.Parse(l, strings.TrimSpace(stored)); err == nil {
			return !t.Add(maxAge).Before(now)
		}
	}
	return false
}
