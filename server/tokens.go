package server

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
	"github.com/authsrv/authsrv/validate"
)

// tokenParams are the request parameters as strings for the token
// package: as configParams, but JSON lists become comma lists and null
// values are left out.
func (c *call) tokenParams() token.Params {
	cfg, _ := c.configParams()
	out := token.Params(cfg)
	for _, k := range c.p.keys() {
		switch raw, _ := c.p.raw(k); raw.(type) {
		case nil:
			delete(out, k)
		case []any:
			if l, err := c.p.list(k); err == nil {
				out[k] = strings.Join(l, ",")
			}
		}
	}
	return out
}

// selfUser is the user-role caller as a resolved user.
func (c *call) selfUser() (user.User, error) {
	u, _, err := c.targetUser()
	return u, err
}

// callerScope is the policy scope of the caller's rights.
func (c *call) callerScope() string {
	if c.who.Role == roleUser {
		return policy.ScopeUser
	}
	return policy.ScopeAdmin
}

// queryFor is the caller's policy query for action with a token owner or
// realm as the target.
func (c *call) queryFor(scope, action string, owner *user.User, realm *string) policy.Query {
	q := policy.Query{Scope: scope, Action: action, Client: clientIP(c.r), UserAgent: c.r.UserAgent(), Data: c.conditionData}
	if c.who.Role == roleUser {
		q.User, q.Realm = policy.Str(c.who.Username), policy.Str(c.who.Realm)
		if owner != nil {
			q.Resolver = policy.Str(owner.Resolver)
		}
	} else if scope == policy.ScopeAdmin {
		q.AdminUser, q.AdminRealm = policy.Str(c.who.Username), policy.Str(c.who.Realm)
	}
	if c.who.Role == roleAdmin || scope != policy.ScopeUser {
		if owner != nil && owner.UID != "" {
			q.User, q.Realm, q.Resolver = policy.Str(owner.Login), policy.Str(owner.Realm), policy.Str(owner.Resolver)
		} else if realm != nil {
			q.Realm = realm
		}
	}
	return q
}

// denied is the refusal of a single-token action.
func (c *call) denied(action string) error {
	if c.who.Role == roleUser {
		return apierr.New(apierr.Policy, fmt.Sprintf("User actions are defined, but the action %s is not allowed!", action))
	}
	return apierr.New(apierr.Policy, fmt.Sprintf("Admin actions are defined, but the action %s is not allowed!", action))
}

// allowedOn reports whether the caller may do action on a token (nil: a
// token not yet known, with an optional owner/realm target).
func (c *call) allowedOn(action string, t *token.Token, owner *user.User, realm *string) (bool, error) {
	if t != nil {
		owner = t.Owner
	}
	scope := c.callerScope()
	try := func(q policy.Query) (bool, error) {
		ok, names, err := c.a.s.Policies().Allowed(c.ctx, q)
		if ok {
			c.policies = append(c.policies, names...)
		}
		return ok, err
	}
	if c.who.Role == roleAdmin && t != nil && !t.Assigned() && len(t.Realms) > 0 {
		for _, r := range t.Realms {
			if ok, err := try(c.queryFor(scope, action, nil, policy.Str(r))); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	}
	return try(c.queryFor(scope, action, owner, realm))
}

// mustAllow is allowedOn with the refusal as an error.
func (c *call) mustAllow(action string, t *token.Token) error {
	ok, err := c.allowedOn(action, t, nil, nil)
	if err != nil {
		return err
	}
	if !ok {
		return c.denied(action)
	}
	return nil
}

// policyString is the value a matching policy gives action in scope for
// the target ("" when none).
func (c *call) policyString(scope, action string, owner *user.User, realm *string) (string, error) {
	vals, err := c.a.s.Policies().Values(c.ctx, c.queryFor(scope, action, owner, realm), false, true)
	if err != nil || len(vals) == 0 {
		return "", err
	}
	keys := slices.Sorted(maps.Keys(vals))
	for _, names := range vals {
		c.policies = append(c.policies, names...)
	}
	return keys[0], nil
}

// policyFlag reports whether a boolean action is set for the target.
func (c *call) policyFlag(scope, action string, owner *user.User) (bool, error) {
	ps, err := c.a.s.Policies().Match(c.ctx, c.queryFor(scope, action, owner, nil))
	if err != nil {
		return false, err
	}
	for _, p := range ps {
		c.policies = append(c.policies, p.Name)
	}
	return len(ps) > 0, nil
}

// targetTokens finds the tokens a request is about: "serial" (path or
// parameter, a comma list) or "serials", else all tokens of the given user
// (the caller itself for the user role). multi reports a list request.
// Users only ever see their own tokens: others count as not found.
func (c *call) targetTokens(allowUser bool) (toks []*token.Token, multi bool, err error) {
	var serials []string
	if c.p.has("serials") {
		if serials, err = c.p.list("serials"); err != nil {
			return nil, false, err
		}
		multi = true
	} else {
		s, err := c.p.str("serial")
		if err != nil {
			return nil, false, err
		}
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				serials = append(serials, x)
			}
		}
		multi = len(serials) > 1
	}
	var self *user.User
	if c.who.Role == roleUser {
		u, err := c.selfUser()
		if err != nil {
			return nil, false, err
		}
		self = &u
	}
	if len(serials) > 0 {
		var missing []string
		for _, s := range serials {
			t, err := c.a.s.Tokens().Get(c.ctx, s)
			if apierr.Is(err, apierr.ResourceNotFound) || (err == nil && self != nil && !sameOwner(t.Owner, self)) {
				missing = append(missing, s)
				continue
			}
			if err != nil {
				return nil, false, err
			}
			toks = append(toks, t)
		}
		if len(missing) > 0 && (!multi || len(toks) == 0) {
			return nil, false, token.NotFound(missing...)
		}
		return toks, multi, nil
	}
	if !allowUser {
		return nil, false, apierr.MissingParameter("serial")
	}
	if self == nil {
		if !c.p.has("user") {
			return nil, false, validate.ErrNoTarget
		}
		u, _, err := c.targetUser()
		if err != nil {
			return nil, false, err
		}
		self = &u
	}
	toks, err = c.a.s.Tokens().ByOwner(c.ctx, *self)
	return toks, true, err
}

func sameOwner(a, b *user.User) bool {
	return a != nil && b != nil && strings.EqualFold(a.Realm, b.Realm) && a.Resolver == b.Resolver && a.UID == b.UID
}

// tokenJSON renders a token as GET /token/ lists it.
func (c *call) tokenJSON(t *token.Token, hidden []string) map[string]any {
	info := map[string]any{}
	for k, v := range t.Info {
		if slices.Contains(hidden, k) || strings.HasPrefix(k, "tan.tan") || strings.HasPrefix(k, "2step_") {
			continue
		}
		info[k] = v
	}
	if t.Type == "tan" {
		n := 0
		for k := range t.Info {
			if strings.HasPrefix(k, "tan.tan") {
				n++
			}
		}
		info["tan.count"] = strconv.Itoa(n)
	}
	obj := map[string]any{
		"id": t.ID, "serial": t.Serial, "tokentype": t.Type, "description": t.Description,
		"active": t.Active, "revoked": t.Revoked, "locked": t.Locked, "rollout_state": t.RolloutState,
		"otplen": t.OTPLen, "count": t.Count, "count_window": t.CountWindow, "sync_window": t.SyncWindow,
		"failcount": t.FailCount, "maxfail": t.MaxFail, "info": info,
		"realms": nonNil(t.Realms), "tokengroup": []string{}, "container_serial": "",
		"resolver": "", "user_id": "", "username": "", "user_realm": "",
	}
	if t.Assigned() {
		obj["resolver"], obj["user_id"], obj["username"], obj["user_realm"] = t.Owner.Resolver, t.Owner.UID, t.Owner.Login, t.Owner.Realm
		editable := false
		if in, err := c.a.s.Resolvers().Instance(c.ctx, t.Owner.Resolver); err == nil {
			editable = in.Editable()
		}
		obj["user_editable"] = editable
	}
	return obj
}

// hiddenInfo lists the tokeninfo keys hide_tokeninfo removes.
func (c *call) hiddenInfo() ([]string, error) {
	if c.who.Role != roleAdmin {
		return nil, nil
	}
	vals, err := c.a.s.Policies().Values(c.ctx, c.queryFor(policy.ScopeAdmin, "hide_tokeninfo", nil, nil), false, false)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(vals)), nil
}

func optBool(c *call, key string) (*bool, error) {
	if !c.p.has(key) {
		return nil, nil
	}
	s, err := c.p.str(key)
	if err != nil {
		return nil, err
	}
	if s == "" {
		return nil, nil
	}
	b := token.IsTrue(s)
	return &b, nil
}

// getTokens is GET /token/.
func getTokens(c *call) (answer, error) {
	var f token.Filter
	var err error
	str := func(key string) string { v, _ := c.p.str(key); return v }
	f.Serial, f.Type, f.TokenRealm, f.Description = str("serial"), str("type"), str("tokenrealm"), str("description")
	f.RolloutState, f.InfoKey, f.InfoValue = str("rollout_state"), str("infokey"), str("infovalue")
	if tl := str("type_list"); tl != "" {
		f.Types = strings.Split(tl, ",")
	}
	if f.Assigned, err = optBool(c, "assigned"); err != nil {
		return answer{}, err
	}
	if f.Active, err = optBool(c, "active"); err != nil {
		return answer{}, err
	}
	if c.who.Role == roleUser {
		u, err := c.selfUser()
		if err != nil {
			return answer{}, err
		}
		f.UserRealm, f.Resolver, f.UserID = u.Realm, u.Resolver, u.UID
	} else {
		if err := c.authorize("tokenlist"); err != nil {
			return answer{}, err
		}
		vis, err := c.realmFilter()
		if err != nil {
			return answer{}, err
		}
		if vis != nil {
			f.Visible = vis
		}
		f.Resolver, f.UserID = str("resolver"), str("userid")
		if c.p.has("user") && str("user") != "" {
			u, _, err := c.targetUser()
			if err != nil {
				return answer{}, err
			}
			f.UserRealm, f.Resolver, f.UserID = u.Realm, u.Resolver, u.UID
		} else if r := str("realm"); r != "" {
			f.UserRealm = r
		}
	}
	sortBy := str("sortby")
	if sortBy != "" && !slices.Contains(token.SortColumns, sortBy) {
		return answer{}, apierr.New(apierr.Parameter, "sortby must be one of "+strings.Join(token.SortColumns, ", "))
	}
	desc := strings.EqualFold(str("sortdir"), "desc")
	page, size, err := c.pageParams()
	if err != nil {
		return answer{}, err
	}
	csvOut := strings.EqualFold(str("outform"), "csv")
	if csvOut {
		size = 0
	}
	p, err := c.a.s.Tokens().List(c.ctx, f, sortBy, desc, page, size)
	if err != nil {
		return answer{}, err
	}
	hidden, err := c.hiddenInfo()
	if err != nil {
		return answer{}, err
	}
	if csvOut {
		return tokenCSV(c, p.Tokens, hidden), nil
	}
	list := make([]map[string]any, 0, len(p.Tokens))
	for _, t := range p.Tokens {
		list = append(list, c.tokenJSON(t, hidden))
	}
	val := map[string]any{"count": p.Count, "current": p.Page, "tokens": list}
	if p.Prev > 0 {
		val["prev"] = p.Prev
	}
	if p.Next > 0 {
		val["next"] = p.Next
	}
	return answer{value: val}, nil
}

// checkPINPolicy applies otp_pin_minlength/maxlength/contents (and their
// <type>_ variants) of the caller's scope to a new PIN.
func (c *call) checkPINPolicy(typ, pin string, owner *user.User) error {
	scope := c.callerScope()
	return policy.CheckPINRules(typ, pin, func(action string) (string, error) {
		return c.policyString(scope, action, owner, nil)
	})
}

// pageParams reads page (1-based, default 1) and pagesize (default 15).
func (c *call) pageParams() (page, size int, err error) {
	if page, err = c.p.integer("page", 1); err != nil {
		return 0, 0, err
	}
	if size, err = c.p.integer("pagesize", 15); err != nil {
		return 0, 0, err
	}
	if page < 1 || size < 1 || size > 10000 {
		return 0, 0, apierr.New(apierr.Parameter, "page must be at least 1 and pagesize from 1 to 10000")
	}
	return page, size, nil
}
