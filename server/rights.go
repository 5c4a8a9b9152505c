package server

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/user"
)

func parseAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return netip.Addr{}, apierr.New(apierr.Parameter, "client must be an IP address")
	}
	return ip.Unmap(), nil
}

// optParam returns a pointer to a non-empty string parameter, else nil
// (the policy filter then does not restrict).
func (c *call) optParam(keys ...string) *string {
	for _, k := range keys {
		if v, err := c.p.str(k); err == nil && v != "" {
			return &v
		}
	}
	return nil
}

// policyQuery is the policy query of the caller for action: admins are
// matched by their name and realm against admin policies, with the
// request's target user, realm and resolver; users against user policies
// with themselves as the target.
func (c *call) policyQuery(action string) policy.Query {
	q := policy.Query{Action: action, Client: clientIP(c.r), UserAgent: c.r.UserAgent(), Data: c.conditionData}
	if c.who.Role == roleUser {
		q.Scope = policy.ScopeUser
		q.User, q.Realm = policy.Str(c.who.Username), policy.Str(c.who.Realm)
		return q
	}
	q.Scope = policy.ScopeAdmin
	q.AdminUser, q.AdminRealm = policy.Str(c.who.Username), policy.Str(c.who.Realm)
	q.Realm = c.optParam("realm")
	q.Resolver = c.optParam("resolver", "resolvername")
	if u := c.optParam("user"); u != nil {
		login := *u
		if q.Realm == nil {
			if l, r := user.Split(login, c.isRealm, true); r != "" {
				login, q.Realm = l, policy.Str(r)
			}
		}
		q.User = &login
	}
	return q
}

// authorize is the one rights check every protected handler calls with its
// action name: allowed when a matching admin (or user) policy grants the
// action, or when the scope has no active policy at all.
func (c *call) authorize(action string) error {
	if c.who == nil {
		return errMissingHeader
	}
	ok, names, err := c.a.s.Policies().Allowed(c.ctx, c.policyQuery(action))
	if err != nil {
		return err
	}
	c.policies = append(c.policies, names...)
	if ok {
		return nil
	}
	if c.who.Role == roleUser {
		return apierr.New(apierr.Policy, fmt.Sprintf("User actions are defined, but the action %s is not allowed!", action))
	}
	return apierr.New(apierr.Policy, fmt.Sprintf("Admin actions are defined, but the action %s is not allowed!", action))
}

// conditionData is what policy conditions may read about this request,
// built once and only when a policy with conditions is considered.
func (c *call) conditionData() policy.ConditionData {
	d := policy.ConditionData{
		Headers: map[string][]string(c.r.Header.Clone()),
		Environment: map[string]any{
			"REMOTE_ADDR": clientIP(c.r).String(), "HTTP_USER_AGENT": c.r.UserAgent(),
			"SERVER_NAME": c.r.Host, "REQUEST_METHOD": c.r.Method, "PATH_INFO": c.r.URL.Path,
		},
		RequestData: map[string]any{},
	}
	for _, k := range c.p.keys() {
		if k == "pass" || k == "password" {
			continue
		}
		v, _ := c.p.raw(k)
		d.RequestData[k] = v
	}
	if c.who == nil || (c.who.Role == roleAdmin && !c.p.has("user")) {
		return d
	}
	u, in, err := c.targetUser()
	if err != nil || in == nil {
		return d
	}
	info, err := in.User(c.ctx, u.UID)
	if err != nil {
		return d
	}
	attrs, _ := c.a.s.UserAttributes().Get(c.ctx, u)
	d.UserInfo = map[string]any{}
	for k, v := range attrs {
		d.UserInfo[k] = v
	}
	maps.Copy(d.UserInfo, map[string]any(info))
	return d
}

// attributeRules are the merged custom-attribute rights of the caller.
type attributeRules struct {
	all bool                // no restricting policy
	set map[string][]string // key (or *) -> values (or *)
	del []string            // keys (or *)
}

// attributeRights reads set_custom_user_attributes and
// delete_custom_user_attributes from the caller's scope: ":key: v1 v2
// :key2: *" for setting, "key1 key2" or "*" for deleting.
func (c *call) attributeRights() (attributeRules, error) {
	scope := policy.ScopeAdmin
	if c.who.Role == roleUser {
		scope = policy.ScopeUser
	}
	active, err := c.a.s.Policies().ActiveInScope(c.ctx, scope)
	if err != nil || !active {
		return attributeRules{all: true}, err
	}
	rules := attributeRules{set: map[string][]string{}}
	q := c.policyQuery("set_custom_user_attributes")
	vals, err := c.a.s.Policies().Values(c.ctx, q, false, true)
	if err != nil {
		return rules, err
	}
	for v := range vals {
		key := ""
		for _, f := range strings.Fields(v) {
			if len(f) > 1 && strings.HasPrefix(f, ":") && strings.HasSuffix(f, ":") {
				key = f[1 : len(f)-1]
				if _, ok := rules.set[key]; !ok {
					rules.set[key] = []string{}
				}
				continue
			}
			if key != "" {
				rules.set[key] = append(rules.set[key], f)
			}
		}
	}
	q.Action = "delete_custom_user_attributes"
	dvals, err := c.a.s.Policies().Values(c.ctx, q, false, true)
	if err != nil {
		return rules, err
	}
	for v := range dvals {
		rules.del = append(rules.del, strings.Fields(v)...)
	}
	slices.Sort(rules.del)
	rules.del = slices.Compact(rules.del)
	return rules, nil
}

func (r attributeRules) maySet(key, value string) bool {
	if r.all {
		return true
	}
	for _, k := range []string{key, "*"} {
		vals, ok := r.set[k]
		if ok && (slices.Contains(vals, "*") || slices.Contains(vals, value)) {
			return true
		}
	}
	return false
}

func (r attributeRules) mayDelete(key string) bool {
	return r.all || slices.Contains(r.del, "*") || slices.Contains(r.del, key)
}

func (r attributeRules) editable() map[string]any {
	if r.all {
		return map[string]any{"delete": []string{"*"}, "set": map[string]any{"*": []string{"*"}}}
	}
	set := map[string]any{}
	for k, v := range r.set {
		set[k] = nonNil(v)
	}
	return map[string]any{"delete": nonNil(r.del), "set": set}
}

// realmFilter lists the realms an admin may see in GET /realm/ (nil: all):
// the union of the realms of the admin policies matching the admin, unless
// one of them has no realm or none matches.
func (c *call) realmFilter() ([]string, error) {
	if c.who.Role != roleAdmin {
		return nil, nil
	}
	active, err := c.a.s.Policies().ActiveInScope(c.ctx, policy.ScopeAdmin)
	if err != nil || !active {
		return nil, err
	}
	ps, err := c.a.s.Policies().Match(c.ctx, policy.Query{Scope: policy.ScopeAdmin,
		AdminUser: policy.Str(c.who.Username), AdminRealm: policy.Str(c.who.Realm),
		Client: clientIP(c.r), UserAgent: c.r.UserAgent(), SkipConditions: true})
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
