package server

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
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
	vals, err := c.a.s.Policies().Values(c.ctx, c.a.s.Ops().Query(c.ctx, c.caller(), "hide_tokeninfo", authsrv.Target{}), false, false)
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
		u, _, err := c.targetUser()
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
	val := map[string]any{"count": p.Count, "current": p.Page, "tokens": list, "prev": pageOrNull(p.Prev), "next": pageOrNull(p.Next)}
	return answer{value: val}, nil
}

// pageOrNull is a neighbour page number as privacyIDEA sends it: null
// when there is none.
func pageOrNull(page int) any {
	if page > 0 {
		return page
	}
	return nil
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
