package validate

import (
	"context"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/user"
)

// Refusals of the AUTHZ policy api_key_required, as privacyIDEA words
// them.
var (
	// ErrNoAPIKey: the caller presented no valid API key.
	ErrNoAPIKey = apierr.New(apierr.Policy, "No valid API key was passed.")
	// ErrNotAPIKey: the caller presented a valid token of another role
	// (an administrator's or a user's).
	ErrNotAPIKey = apierr.New(apierr.Policy, "A correct JWT was passed, but it was no API key.")
)

// requireAPIKey applies AUTHZ api_key_required to a check: when a policy
// matching the request's user as given (login@realm split, an explicit
// realm winning, else the default realm; no user store lookup, so that
// nothing about the user is learnt before the key is checked) and its
// client sets it, only a caller that presented a valid API key (role
// APIKey) may go on. A trusted local program needs none. Without an
// active authorization policy it costs nothing.
func (q *req) requireAPIKey(ctx context.Context) error {
	who := q.r.Caller
	if who.Trusted() || who.Role == caller.APIKey || q.pol.snap == nil || !q.pol.snap.Active(policy.ScopeAuthorization) {
		return nil
	}
	pq := policy.Query{Scope: policy.ScopeAuthorization, Client: who.Client, UserAgent: who.UserAgent,
		Data: func() policy.ConditionData {
			return policy.ConditionData{Headers: who.Headers, Environment: who.Env(), RequestData: who.Data}
		}}
	// A request without a user (a serial) matches only policies that name
	// no user or realm.
	login, realmName := "", ""
	if q.r.User != "" {
		login, realmName = user.Split(q.r.User, func(s string) bool { return q.v.cfg.Realms.Exists(ctx, s) }, true)
		if q.r.Realm != "" {
			realmName = q.r.Realm
		}
		if realmName == "" {
			def, err := q.v.cfg.Realms.Default(ctx)
			if err != nil {
				return err
			}
			realmName = def
		}
		realmName = realm.Normalize(realmName)
	}
	pq.User, pq.Realm = &login, &realmName
	sc, err := q.pol.snap.Scoped(ctx, pq)
	if err != nil {
		return err
	}
	ps, err := sc.Match("api_key_required")
	if err != nil || len(ps) == 0 {
		return err
	}
	for _, p := range ps {
		q.pol.note(p.Name)
	}
	if who.Role == caller.Admin || who.Role == caller.User {
		return ErrNotAPIKey
	}
	return ErrNoAPIKey
}
