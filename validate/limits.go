package validate

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

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

// deltaUnits are the units of the policy durations (auth_cache,
// auth_max_*, last_auth).
var deltaUnits = map[byte]time.Duration{
	's': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour,
	'w': 7 * 24 * time.Hour, 'y': 365 * 24 * time.Hour,
}

// parseDelta reads a policy duration: numbers with units s, m, h, d, w
// or y ("4h", "10m", "7d", "1y", "1d12h").
func parseDelta(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i || j == len(s) {
			return 0, false
		}
		unit, ok := deltaUnits[s[j]|0x20]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(s[i:j], 10, 64)
		if err != nil || n > int64(math.MaxInt64/unit) || total > math.MaxInt64-time.Duration(n)*unit {
			return 0, false
		}
		total += time.Duration(n) * unit
		i = j + 1
	}
	return total, total > 0
}

// pyDelta prints a duration as Python prints a timedelta: "0:01:00",
// "1 day, 2:00:00", with microseconds only when there are some.
func pyDelta(d time.Duration) string {
	us := d.Microseconds()
	days := us / (86400 * 1e6)
	us -= days * 86400 * 1e6
	h, m, s, frac := us/3600e6, us%3600e6/60e6, us%60e6/1e6, us%1e6
	out := fmt.Sprintf("%d:%02d:%02d", h, m, s)
	if frac != 0 {
		out += fmt.Sprintf(".%06d", frac)
	}
	switch {
	case days == 1:
		out = "1 day, " + out
	case days > 1:
		out = fmt.Sprintf("%d days, %s", days, out)
	}
	return out
}

func errPolicyValue(action, v string) error {
	return apierr.New(apierr.Policy, fmt.Sprintf("The value %q of the policy action %s is not valid.", v, action))
}

// rate is a parsed auth_max_fail or auth_max_success value, N/duration.
type rate struct {
	n    int
	per  time.Duration
	name string
}

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

// rateLimit applies auth_max_fail (always) and auth_max_success (after a
// success) to the decision: the user's earlier authentications in the
// window are counted from the authentication records.
func (q *req) rateLimit(ctx context.Context, res Response) (Response, error) {
	maxFail, err := q.pol.rate(ctx, "auth_max_fail")
	if err != nil {
		return res, err
	}
	maxSucc, err := q.pol.rate(ctx, "auth_max_success")
	if err != nil {
		return res, err
	}
	if maxFail.per == 0 && (maxSucc.per == 0 || !res.Value) {
		return res, nil
	}
	now := q.v.cfg.Now()
	var failSince, succSince time.Time
	if maxFail.per > 0 {
		failSince = now.Add(-maxFail.per)
	}
	if maxSucc.per > 0 && res.Value {
		succSince = now.Add(-maxSucc.per)
	}
	succ, fail, err := q.v.countAuths(ctx, q.u, failSince, succSince)
	if err != nil {
		return res, err
	}
	limited := func(msg string) Response {
		out := res
		out.Value, out.Message, out.SendFailed, out.Policies = false, msg, false, nil
		return out
	}
	if maxFail.per > 0 && fail >= maxFail.n {
		q.pol.note(maxFail.name)
		return limited(fmt.Sprintf("Only %d failed authentications per %s allowed.", maxFail.n, pyDelta(maxFail.per))), nil
	}
	if maxSucc.per > 0 && res.Value && succ >= maxSucc.n {
		q.pol.note(maxSucc.name)
		return limited(fmt.Sprintf("Only %d successful authentications per %s allowed.", maxSucc.n, pyDelta(maxSucc.per))), nil
	}
	return res, nil
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
