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
// matching the request's user as given (login@realm split unless
// splitAtSign is off, an explicit realm winning, else the default realm;
// no user store lookup, so that nothing about the user is learnt before
// the key is checked) and its
// client sets it, only a caller that presented a valid API key (role
// APIKey) may go on. A trusted local program needs none. Without an
// active authorization policy it costs nothing.
func (p *policies) requireAPIKey(ctx context.Context, realms *realm.Service, splitAtSign bool, r *Request) error {
	if r.Caller.Trusted() || r.Caller.Role == caller.APIKey || p.snap == nil || !p.snap.Active(policy.ScopeAuthorization) {
		return nil
	}
	who := &r.Caller
	pq := policy.Query{Scope: policy.ScopeAuthorization, Client: who.Client, UserAgent: who.UserAgent,
		Data: func() policy.ConditionData {
			return policy.ConditionData{Headers: who.Headers, Environment: who.Env(), RequestData: who.Data}
		}}
	// A request without a user (a serial) matches only policies that name
	// no user or realm.
	login, realmName := "", ""
	if r.User != "" {
		login, realmName = user.Split(r.User, func(s string) bool { return realms.Exists(ctx, s) }, splitAtSign)
		if r.Realm != "" {
			realmName = r.Realm
		}
		if realmName == "" {
			def, err := realms.Default(ctx)
			if err != nil {
				return err
			}
			realmName = def
		}
		realmName = realm.Normalize(realmName)
	}
	pq.User, pq.Realm = &login, &realmName
	sc, err := p.snap.Scoped(ctx, pq)
	if err != nil {
		return err
	}
	ps, err := sc.Match("api_key_required")
	if err != nil || len(ps) == 0 {
		return err
	}
	for _, m := range ps {
		p.note(m.Name)
	}
	if who.Role == caller.Admin || who.Role == caller.User {
		return ErrNotAPIKey
	}
	return ErrNoAPIKey
}
