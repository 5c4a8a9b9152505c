package validate

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
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

func (q *req) rate(ctx context.Context, action string) (rate, error) {
	sc, err := q.set(ctx, policy.ScopeAuthorization)
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
// window are counted from the audit log.
func (q *req) rateLimit(ctx context.Context, res Response) (Response, error) {
	maxFail, err := q.rate(ctx, "auth_max_fail")
	if err != nil {
		return res, err
	}
	maxSucc, err := q.rate(ctx, "auth_max_success")
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
		d := map[string]any{}
		for k, v := range res.Detail {
			d[k] = v
		}
		d["message"] = msg
		return Response{User: res.User, Detail: d, Challenge: res.Challenge, Challenges: res.Challenges}
	}
	if maxFail.per > 0 && fail >= maxFail.n {
		q.note(maxFail.name)
		return limited(fmt.Sprintf("Only %d failed authentications per %s allowed.", maxFail.n, pyDelta(maxFail.per))), nil
	}
	if maxSucc.per > 0 && res.Value && succ >= maxSucc.n {
		q.note(maxSucc.name)
		return limited(fmt.Sprintf("Only %d successful authentications per %s allowed.", maxSucc.n, pyDelta(maxSucc.per))), nil
	}
	return res, nil
}

// countHidden are the audit columns countAuths does not read (sig_check
// would verify every row's signature).
var countHidden = func() []string {
	var out []string
	for _, c := range audit.Columns() {
		switch c {
		case "date", "action", "success", "authentication", "user", "realm":
		default:
			out = append(out, c)
		}
	}
	return out
}()

// countAuths counts u's successful authentications since succSince and
// failed ones since failSince (a zero time counts none) in the audit log:
// the entries of /validate/check and /auth. A triggered challenge is not
// a failure.
func (v *Validator) countAuths(ctx context.Context, u user.User, failSince, succSince time.Time) (succ, fail int, err error) {
	if v.cfg.Audit == nil {
		return 0, 0, nil
	}
	since := failSince
	if since.IsZero() || (!succSince.IsZero() && succSince.Before(since)) {
		since = succSince
	}
	// The filters narrow the walk; the callback compares exactly (the
	// filter ignores case and reads * as a wildcard).
	q := audit.Query{Filters: map[string]string{"user": u.Login, "realm": u.Realm}, Since: since, Ascending: true, Hide: countHidden}
	err = v.cfg.Audit.Each(ctx, q, func(r audit.Row) error {
		if s, _ := r["user"].(string); s != u.Login {
			return nil
		}
		if s, _ := r["realm"].(string); s != u.Realm {
			return nil
		}
		action, _ := r["action"].(string)
		action = strings.TrimSuffix(action, "/")
		if !strings.HasSuffix(action, "/validate/check") && !strings.HasSuffix(action, " /auth") {
			return nil
		}
		ds, _ := r["date"].(string)
		date, err := time.Parse(audit.DateLayout, ds)
		if err != nil {
			return nil
		}
		ok, _ := r["success"].(int)
		switch {
		case ok == 1:
			if !succSince.IsZero() && !date.Before(succSince) {
				succ++
			}
		case r["authentication"] == "CHALLENGE":
		default:
			if !failSince.IsZero() && !date.Before(failSince) {
				fail++
			}
		}
		return nil
	})
	return succ, fail, err
}

// lastAuthMax returns the AUTHZ last_auth duration, if a policy sets one.
func (q *req) lastAuthMax(ctx context.Context) (time.Duration, string, error) {
	sc, err := q.set(ctx, policy.ScopeAuthorization)
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

// commit records a successful match through the token service. In the
// same transaction it writes tokeninfo last_auth, and applies the AUTHZ
// last_auth policy to the value it finds there: when that is too old the
// OTP is still used up but last_auth is left as it was, and stale returns
// it for the rejection message.
func (q *req) commit(ctx context.Context, snapshot *token.Token, m token.Match, msg string) (t *token.Token, stale string, err error) {
	serial := snapshot.Serial
	maxAge, name, err := q.lastAuthMax(ctx)
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
	q.recorded = wrote
	if tooOld {
		q.note(name)
		return t, stale, nil
	}
	return t, "", nil
}

// recordWrite is Request.Record's write of the success that committing
// snapshot with msg gives, or nil when the response could still change
// after the commit: an authorization policy (serial, tokentype, tokeninfo,
// last_auth, authorized, the rate limits, the detail shaping) or
// reset_all_user_tokens is in effect, or no Record was asked for.
func (q *req) recordWrite(ctx context.Context, msg string, snapshot *token.Token) (func(store.Tx) error, error) {
	if q.r.Record == nil || (q.pol.snap != nil && q.pol.snap.Active(policy.ScopeAuthorization)) {
		return nil, nil
	}
	if snapshot.Assigned() {
		if name, err := q.flag(ctx, policy.ScopeAuthentication, "reset_all_user_tokens"); err != nil || name != "" {
			return nil, err
		}
	}
	// enroll_via_multichallenge may turn the success into a challenge.
	if v, err := q.value(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge"); err != nil || v != "" {
		return nil, err
	}
	if _, _, due := token.PINChangeDue(snapshot, q.v.cfg.Now()); due {
		// change_pin_via_validate may turn the success into a challenge.
		return nil, nil
	}
	res := q.success(msg, snapshot, "")
	res.Policies = q.pol.used
	return q.r.Record(res), nil
}

// fail raises the fail counters (and count_auth) of the candidates in one
// transaction, with what AutoResync remembers, and answers res. When record
// is set, Request.Record's write of res runs in that transaction when
// nothing after it can change res (see recordWrite; a
// failure's detail is also replaced under hide_specific_error_message), so
// that a rejection costs one commit, not two.
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
	q.recorded = write != nil
	return res, nil
}

// failRecord is Request.Record's write of the failure res, or nil when the
// response could still change after the fail counters were written.
func (q *req) failRecord(ctx context.Context, res Response) (func(store.Tx) error, error) {
	if q.r.Record == nil || (q.pol.snap != nil && q.pol.snap.Active(policy.ScopeAuthorization)) {
		return nil, nil
	}
	if name, err := q.flag(ctx, policy.ScopeAuthentication, "hide_specific_error_message"); err != nil || name != "" {
		return nil, err
	}
	res.Policies = q.pol.used
	return q.r.Record(res), nil
}

// success is the decision after a committed match: a success, or the
// last_auth rejection.
func (q *req) success(msg string, t *token.Token, stale string) Response {
	d := detailOne(msg, t)
	if stale != "" {
		d["message"] = fmt.Sprintf("The last successful authentication was %s. It is too long ago.", stale)
		return Response{User: q.u, Detail: d}
	}
	if msg != MsgFoundChallenge {
		if v, set, due := token.PINChangeDue(t, q.v.cfg.Now()); set {
			d["next_pin_change"], d["pin_change"] = v, due
		}
	}
	return Response{Value: true, User: q.u, Detail: d}
}
