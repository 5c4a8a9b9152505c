package server

import (
	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/rs/zerolog/hlog"
	"net/netip"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
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

// caller is the request's caller as the library sees it: the token's
// identity (none: an anonymous caller of /validate), the client, the
// request id, the audit action, and what policy conditions read.
func (c *call) caller() caller.Caller {
	who := caller.Caller{Role: caller.APIKey, Client: clientIP(c.r), UserAgent: c.r.UserAgent(),
		Action:  c.r.Method + " " + c.r.URL.Path,
		Headers: map[string][]string(c.r.Header.Clone()),
		Environment: map[string]any{
			"REMOTE_ADDR": clientIP(c.r).String(), "HTTP_USER_AGENT": c.r.UserAgent(),
			"SERVER_NAME": c.r.Host, "REQUEST_METHOD": c.r.Method, "PATH_INFO": c.r.URL.Path,
		},
	}
	if id, ok := hlog.IDFromRequest(c.r); ok {
		who.RequestID = id.String()
	}
	if c.who != nil {
		who.Name, who.Realm = c.who.Username, c.who.Realm
		switch c.who.Role {
		case roleAdmin:
			who.Role = caller.Admin
		case roleUser:
			who.Role = caller.User
		}
	}
	if c.p != nil {
		who.Data = map[string]any{}
		for _, k := range c.p.keys() {
			if k == "pass" || k == "password" {
				continue
			}
			v, _ := c.p.raw(k)
			who.Data[k] = v
		}
	}
	return who
}

// target is the request's target user, realm and resolver parameters.
func (c *call) target() authsrv.Target {
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, err := c.p.str(k); err == nil && v != "" {
				return v
			}
		}
		return ""
	}
	return authsrv.Target{User: str("user"), Realm: str("realm"), Resolver: str("resolver", "resolvername")}
}

// policyQuery is the policy query of the caller for action (see
// authsrv.Ops.Query).
func (c *call) policyQuery(action string) policy.Query {
	return c.a.s.Ops().Query(c.ctx, c.caller(), action, c.target())
}

// authorize is the one rights check every protected handler calls with its
// action name (authsrv.Ops.Authorize).
func (c *call) authorize(action string) error {
	if c.who == nil {
		return errMissingHeader
	}
	names, err := c.a.s.Ops().Authorize(c.ctx, c.caller(), action, c.target())
	c.policies = append(c.policies, names...)
	return err
}

// conditionData is what policy conditions may read about this request.
func (c *call) conditionData() policy.ConditionData {
	return c.policyQuery("").Data()
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

// realmFilter lists the realms an admin may see in GET /realm/ (nil: all).
func (c *call) realmFilter() ([]string, error) {
	return c.a.s.Ops().RealmFilter(c.ctx, c.caller())
}
