package validate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/user"
)

// policies are the request's policies: one snapshot of the policy set,
// and per scope the policies that match the request's user, matched once
// and read action by action.
type policies struct {
	snap *policy.Snapshot
	// auth and authz match the request's user; they are made on first
	// use, when the user is known. authzAll matches any user (privacyIDEA
	// reads serial, tokeninfo and no_detail_* for the action only).
	auth, authz, authzAll *policy.Scoped
	// used are the names of the policies that took effect.
	used []string
	// who is the request's caller (client and user agent are matched);
	// u is the request's user as it is resolved.
	who *caller.Caller
	u   *user.User
	// t is the request's target, whose user store the conditions on user
	// attributes read.
	t *target
	// data is the conditions' reader of the request (made once).
	data func() policy.ConditionData
}

// conditionData is what the conditions of the request's policies read
// (built only when a matching policy has one): the caller's headers and
// environment, the request's parameters (never the password) and the
// attributes of the request's user.
func (p *policies) conditionData(ctx context.Context) policy.ConditionData {
	d := policy.ConditionData{Headers: p.who.Headers, Environment: p.who.Env(), RequestData: map[string]any{}}
	if t := p.t; t != nil {
		r := t.r
		for k, v := range r.Options {
			d.RequestData[k] = v
		}
		for k, v := range map[string]string{"user": r.User, "realm": r.Realm, "resolver": r.Resolver, "serial": r.Serial,
			"transaction_id": r.TransactionID, "type": r.Type} {
			if v != "" {
				d.RequestData[k] = v
			}
		}
		if t.in != nil && t.u.UID != "" {
			if info, err := t.in.User(ctx, t.u.UID); err == nil {
				d.UserInfo = map[string]any{}
				for k, v := range info {
					d.UserInfo[k] = v
				}
				if attrs, err := t.v.userAttrs(ctx, t.u); err == nil {
					for k, v := range attrs {
						if _, ok := d.UserInfo[k]; !ok {
							d.UserInfo[k] = v
						}
					}
				}
			}
		}
	}
	return d
}

// any reports whether a policy of the two scopes exists at all.
func (p *policies) any() bool {
	return p.snap != nil && (p.snap.Active(policy.ScopeAuthentication) || p.snap.Active(policy.ScopeAuthorization))
}

// note records policies that took effect.
func (p *policies) note(names ...string) {
	for _, n := range names {
		if n != "" && !slices.Contains(p.used, n) {
			p.used = append(p.used, n)
		}
	}
}

// query is the policy query for user u.
func (p *policies) query(ctx context.Context, scope string, u user.User) policy.Query {
	if p.data == nil {
		p.data = func() policy.ConditionData { return p.conditionData(ctx) }
	}
	pq := policy.Query{Scope: scope, Client: p.who.Client, UserAgent: p.who.UserAgent, Data: p.data}
	if u.Login == "" && u.Realm == "" && u.Resolver == "" {
		// No user at all (the serial of a token without an owner):
		// privacyIDEA matches the empty user, so only policies that name
		// no realm, resolver or user apply, not every realm's.
		empty := policy.Str("")
		pq.User, pq.Realm, pq.Resolver = empty, empty, empty
		return pq
	}
	if u.Login != "" {
		pq.User = policy.Str(u.Login)
	}
	if u.Realm != "" {
		pq.Realm = policy.Str(u.Realm)
	}
	if u.Resolver != "" {
		pq.Resolver = policy.Str(u.Resolver)
	}
	return pq
}

// set returns the policies of scope that match the request's user.
func (p *policies) set(ctx context.Context, scope string) (*policy.Scoped, error) {
	if p.snap == nil || !p.snap.Active(scope) {
		return nil, nil
	}
	var cached **policy.Scoped
	switch scope {
	case policy.ScopeAuthentication:
		cached = &p.auth
	case policy.ScopeAuthorization:
		cached = &p.authz
	default:
		return p.snap.Scoped(ctx, p.query(ctx, scope, *p.u))
	}
	if *cached == nil {
		sc, err := p.snap.Scoped(ctx, p.query(ctx, scope, *p.u))
		if err != nil {
			return nil, err
		}
		*cached = sc
	}
	return *cached, nil
}

// setAll returns the authorization policies that match any user.
func (p *policies) setAll(ctx context.Context) (*policy.Scoped, error) {
	if p.snap == nil || !p.snap.Active(policy.ScopeAuthorization) {
		return nil, nil
	}
	if p.authzAll == nil {
		sc, err := p.snap.Scoped(ctx, policy.Query{Scope: policy.ScopeAuthorization, Client: p.who.Client, UserAgent: p.who.UserAgent})
		if err != nil {
			return nil, err
		}
		p.authzAll = sc
	}
	return p.authzAll, nil
}

// value returns the value the request's policies give action: that of the
// best priority, the lowest of several there; "" when none gives one. A
// comma written \, is a comma.
func (p *policies) value(ctx context.Context, scope, action string) (string, error) {
	sc, err := p.set(ctx, scope)
	if err != nil {
		return "", err
	}
	v, _, err := bestValue(sc, action)
	return v, err
}

// valueAs is value for a user without a name in realm: the policies that
// name realm or no realm, and no user and no resolver.
func (p *policies) valueAs(ctx context.Context, scope, action, realm string) (string, error) {
	if p.snap == nil || !p.snap.Active(scope) {
		return "", nil
	}
	q := p.query(ctx, scope, user.User{})
	q.Realm = policy.Str(realm)
	sc, err := p.snap.Scoped(ctx, q)
	if err != nil {
		return "", err
	}
	v, _, err := bestValue(sc, action)
	return v, err
}

// valueNamed is value with the name of the policy that gave it.
func (p *policies) valueNamed(ctx context.Context, scope, action string) (string, string, error) {
	sc, err := p.set(ctx, scope)
	if err != nil {
		return "", "", err
	}
	return bestValue(sc, action)
}

func bestValue(sc *policy.Scoped, action string) (string, string, error) {
	if sc.Empty() {
		return "", "", nil
	}
	ss, err := sc.Settings(action)
	if err != nil {
		return "", "", err
	}
	best, name, prio := "", "", 0
	for _, s := range ss {
		v, ok := s.Value.(string)
		if !ok || v == "" {
			continue
		}
		if prio != 0 && s.Priority > prio {
			break
		}
		if prio == 0 || v < best {
			best, name = v, s.Name
		}
		prio = s.Priority
	}
	return unescape(best), name, nil
}

// values returns every string value the request's policies give action,
// by priority (for actions whose values all apply).
func values(sc *policy.Scoped, action string) ([]string, []string, error) {
	if sc.Empty() {
		return nil, nil, nil
	}
	ss, err := sc.Settings(action)
	if err != nil {
		return nil, nil, err
	}
	var out, names []string
	for _, s := range ss {
		if v, ok := s.Value.(string); ok && v != "" {
			out = append(out, unescape(v))
			names = append(names, s.Name)
		}
	}
	return out, names, nil
}

// flag returns the name of the first policy, by priority, that sets the
// boolean action, or "".
func (p *policies) flag(ctx context.Context, scope, action string) (string, error) {
	sc, err := p.set(ctx, scope)
	if err != nil {
		return "", err
	}
	return flagOf(sc, action)
}

func flagOf(sc *policy.Scoped, action string) (string, error) {
	if sc.Empty() {
		return "", nil
	}
	ss, err := sc.Settings(action)
	if err != nil {
		return "", err
	}
	for _, s := range ss {
		switch v := s.Value.(type) {
		case bool:
			if !v {
				continue
			}
		case string:
			if v == "" || strings.EqualFold(v, "false") || v == "0" {
				continue
			}
		}
		return s.Name, nil
	}
	return "", nil
}

// unique returns the one value of action among the best-priority
// policies; different values there are a policy error (403).
func unique(sc *policy.Scoped, action string) (string, []string, error) {
	if sc.Empty() {
		return "", nil, nil
	}
	vals, err := sc.Values(action, true, true)
	if err != nil {
		return "", nil, err
	}
	for v, names := range vals {
		return unescape(v), names, nil
	}
	return "", nil, nil
}

// unescape turns the \, of a policy value into a comma.
func unescape(s string) string { return strings.ReplaceAll(s, `\,`, ",") }

// errPolicyValue is the error for a policy value that does not parse.
func errPolicyValue(action, v string) error {
	return apierr.New(apierr.Policy, fmt.Sprintf("The value %q of the policy action %s is not valid.", v, action))
}
