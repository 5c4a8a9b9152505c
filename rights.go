package authsrv

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/user"
)

// Target is what an administrator's right is checked against: the user
// (a login, or login@realm), realm and resolver an operation is about.
// Empty fields do not restrict.
type Target struct {
	User, Realm, Resolver string
}

// Query is the policy query of who for action: administrators are matched
// by their name and realm against admin policies, with t as the target;
// users against user policies with themselves as the target. A trusted
// local caller is matched as an administrator without name.
func (o *Ops) Query(ctx context.Context, who caller.Caller, action string, t Target) policy.Query {
	q := policy.Query{Action: action, Client: who.Client, UserAgent: who.UserAgent}
	q.Data = func() policy.ConditionData { return o.conditionData(ctx, who, t) }
	if who.Role == caller.User {
		q.Scope = policy.ScopeUser
		q.User, q.Realm = policy.Str(who.Name), policy.Str(who.Realm)
		return q
	}
	q.Scope = policy.ScopeAdmin
	if !who.Trusted() {
		q.AdminUser, q.AdminRealm = policy.Str(who.Name), policy.Str(who.Realm)
	}
	if t.Realm != "" {
		q.Realm = policy.Str(t.Realm)
	}
	if t.Resolver != "" {
		q.Resolver = policy.Str(t.Resolver)
	}
	if t.User != "" {
		login := t.User
		if q.Realm == nil {
			if l, r := o.splitUser(ctx, login); r != "" {
				login, q.Realm = l, policy.Str(r)
			}
		}
		q.User = &login
	}
	return q
}

// Authorize is the one rights check: who may do action on t when a
// matching admin (or user) policy grants it, or when the caller's scope
// has no active policy at all. A trusted local caller may do everything.
// It returns the names of the policies that allowed it.
func (o *Ops) Authorize(ctx context.Context, who caller.Caller, action string, t Target) ([]string, error) {
	if who.Trusted() {
		return nil, nil
	}
	if who.Role != caller.Admin && who.Role != caller.User {
		return nil, apierr.New(apierr.AuthMissingRight, "Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
	}
	ok, names, err := o.s.policies.Allowed(ctx, o.Query(ctx, who, action, t))
	if err != nil {
		return nil, err
	}
	if ok {
		return names, nil
	}
	return nil, Denied(who, action)
}

// Denied is the refusal of action to who, worded as privacyIDEA words it.
func Denied(who caller.Caller, action string) error {
	if who.Role == caller.User {
		return apierr.New(apierr.Policy, fmt.Sprintf("User actions are defined, but the action %s is not allowed!", action))
	}
	return apierr.New(apierr.Policy, fmt.Sprintf("Admin actions are defined, but the action %s is not allowed!", action))
}

// conditionData is what policy conditions may read about a request: the
// caller's headers, environment and request data, and the target user's
// attributes (for users: themselves).
func (o *Ops) conditionData(ctx context.Context, who caller.Caller, t Target) policy.ConditionData {
	d := policy.ConditionData{
		Headers:     who.Headers,
		Environment: who.Env(),
		RequestData: who.Data,
	}
	if d.RequestData == nil {
		d.RequestData = map[string]any{}
	}
	if who.Role == caller.APIKey || who.Role == caller.Anonymous || (who.Role != caller.User && t.User == "") {
		return d
	}
	u, in, err := o.ResolveTarget(ctx, who, t)
	if err != nil || in == nil {
		return d
	}
	info, err := in.User(ctx, u.UID)
	if err != nil {
		return d
	}
	attrs, _ := o.s.attrs.Get(ctx, u)
	d.UserInfo = map[string]any{}
	for k, v := range attrs {
		d.UserInfo[k] = v
	}
	maps.Copy(d.UserInfo, map[string]any(info))
	return d
}

// ResolveTarget finds the user an operation is about: the caller itself
// for the user role; else t.User (login or login@realm) with the optional
// t.Realm and t.Resolver.
func (o *Ops) ResolveTarget(ctx context.Context, who caller.Caller, t Target) (user.User, *resolver.Instance, error) {
	login, realmName, resolverName := t.User, t.Realm, t.Resolver
	if who.Role == caller.User {
		login, realmName, resolverName = who.Name, who.Realm, ""
	} else if realmName == "" {
		login, realmName = o.splitUser(ctx, login)
	}
	if resolverName != "" {
		if realmName == "" {
			def, err := o.s.realms.Default(ctx)
			if err != nil {
				return user.User{}, nil, err
			}
			realmName = def
		}
		u, in, err := o.s.realms.ResolveIn(ctx, login, realmName, resolverName)
		if errors.Is(err, resolver.ErrNotFound) {
			return u, nil, apierr.New(apierr.User, fmt.Sprintf("The resolver '%s' does not exist!", resolverName))
		}
		return u, in, err
	}
	u, in, err := o.s.realms.Resolve(ctx, login, realmName)
	if errors.Is(err, realm.ErrNotFound) {
		return u, nil, realm.ErrNoUser
	}
	return u, in, err
}

// RealmFilter lists the realms an administrator may see (nil: all): the
// union of the realms of the admin policies matching who, unless one of
// them has no realm or none matches.
func (o *Ops) RealmFilter(ctx context.Context, who caller.Caller) ([]string, error) {
	if who.Role != caller.Admin {
		return nil, nil
	}
	active, err := o.s.policies.ActiveInScope(ctx, policy.ScopeAdmin)
	if err != nil || !active {
		return nil, err
	}
	ps, err := o.s.policies.Match(ctx, policy.Query{Scope: policy.ScopeAdmin,
		AdminUser: policy.Str(who.Name), AdminRealm: policy.Str(who.Realm),
		Client: who.Client, UserAgent: who.UserAgent, SkipConditions: true})
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		if len(p.Realm) == 0 {
			return nil, nil
		}
		out = append(out, p.Realm...)
	}
	return out, nil
}
