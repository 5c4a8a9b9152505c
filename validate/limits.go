package validate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/policy"
)

// rate is a parsed auth_max_fail or auth_max_success value, N/duration.
type rate struct {
	n    int
	per  time.Duration
	name string
}

// rate reads the request's AUTHZ action, auth_max_fail or
// auth_max_success (zero when no policy sets it).
func (p *policies) rate(ctx context.Context, action string) (rate, error) {
	sc, err := p.set(ctx, policy.ScopeAuthorization)
	if err != nil || sc.Empty() {
		return rate{}, err
	}
	v, names, err := unique(sc, action)
	if err != nil || v == "" {
		return rate{}, err
	}
	count, per, ok := strings.Cut(v, "/")
	n, err := strconv.Atoi(strings.TrimSpace(count))
	d, dok := parseDelta(per)
	if !ok || err != nil || n < 0 || !dok {
		return rate{}, errPolicyValue(action, v)
	}
	return rate{n: n, per: d, name: names[0]}, nil
}

// limiter applies the AUTHZ rate limits auth_max_fail and
// auth_max_success to the decision of a user path, counting the user's
// earlier results in the window from the authentication records. It
// keeps no state: the user path makes it where it applies it.
type limiter struct {
	v   *Validator
	t   *target
	pol *policies
}

// apply applies auth_max_fail (always) and auth_max_success (after a
// success) to res.
func (l limiter) apply(ctx context.Context, res Response) (Response, error) {
	maxFail, err := l.pol.rate(ctx, "auth_max_fail")
	if err != nil {
		return res, err
	}
	maxSucc, err := l.pol.rate(ctx, "auth_max_success")
	if err != nil {
		return res, err
	}
	if maxFail.per == 0 && (maxSucc.per == 0 || !res.Value) {
		return res, nil
	}
	now := l.v.cfg.Now()
	var failSince, succSince time.Time
	if maxFail.per > 0 {
		failSince = now.Add(-maxFail.per)
	}
	if maxSucc.per > 0 && res.Value {
		succSince = now.Add(-maxSucc.per)
	}
	succ, fail, err := l.v.countAuths(ctx, l.t.u, failSince, succSince)
	if err != nil {
		return res, err
	}
	limited := func(msg string) Response {
		out := res
		out.Value, out.Message, out.SendFailed, out.Policies = false, msg, false, nil
		return out
	}
	if maxFail.per > 0 && fail >= maxFail.n {
		l.pol.note(maxFail.name)
		return limited(fmt.Sprintf("Only %d failed authentications per %s allowed.", maxFail.n, pyDelta(maxFail.per))), nil
	}
	if maxSucc.per > 0 && res.Value && succ >= maxSucc.n {
		l.pol.note(maxSucc.name)
		return limited(fmt.Sprintf("Only %d successful authentications per %s allowed.", maxSucc.n, pyDelta(maxSucc.per))), nil
	}
	return res, nil
}
