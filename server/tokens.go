package server

import (
	"strconv"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

// tokenParams are the request parameters as strings for the token
// package: as configParams, but JSON lists become comma lists and null
// values are left out. One pass over the parameters, in no order: every
// parameter gives its own entry.
func (c *call) tokenParams() token.Params {
	out := make(token.Params, len(c.p.values))
	for k, raw := range c.p.values {
		switch raw.(type) {
		case nil:
			continue
		case []any:
			if l, err := c.p.list(k); err == nil {
				out[k] = strings.Join(l, ",")
				continue
			}
		}
		v, err := configString(k, raw)
		if err != nil {
			// As configParams' error left no parameters at all.
			return nil
		}
		out[k] = v
	}
	return out
}

// tokenJSON renders a token as GET /token/ lists it (the library has
// already removed the tokeninfo keys hide_tokeninfo hides).
func (c *call) tokenJSON(t *token.Token) map[string]any {
	info := map[string]any{}
	for k, v := range t.Info {
		if strings.HasPrefix(k, "tan.tan") || strings.HasPrefix(k, "2step_") {
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

// getTokens is GET /token/ (authsrv.Ops.ListTokens).
func getTokens(c *call) (answer, error) {
	req, csvOut, err := c.tokenListParams()
	if err != nil {
		if c.who.Role == roleUser {
			return answer{}, err
		}
		return answer{}, c.refused("tokenlist", err)
	}
	p, err := c.a.s.Ops().ListTokens(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	if csvOut {
		return tokenCSV(c, p.Tokens), nil
	}
	list := make([]map[string]any, 0, len(p.Tokens))
	for _, t := range p.Tokens {
		list = append(list, c.tokenJSON(t))
	}
	val := map[string]any{"count": p.Count, "current": p.Page, "tokens": list, "prev": pageOrNull(p.Prev), "next": pageOrNull(p.Next)}
	return answer{value: val}, nil
}

// tokenListParams reads GET /token/: the filters, the owner, paging and
// order, and whether the answer is CSV (every token on one page).
func (c *call) tokenListParams() (authsrv.TokenListRequest, bool, error) {
	var req authsrv.TokenListRequest
	f := &req.Filter
	var err error
	str := func(key string) string { v, _ := c.p.str(key); return v }
	f.Serial, f.Type, f.TokenRealm, f.Description = str("serial"), str("type"), str("tokenrealm"), str("description")
	f.RolloutState, f.InfoKey, f.InfoValue = str("rollout_state"), str("infokey"), str("infovalue")
	if tl := str("type_list"); tl != "" {
		f.Types = strings.Split(tl, ",")
	}
	if f.Assigned, err = optBool(c, "assigned"); err != nil {
		return req, false, err
	}
	if f.Active, err = optBool(c, "active"); err != nil {
		return req, false, err
	}
	f.UserID = str("userid")
	req.Owner = authsrv.Target{User: str("user"), Realm: str("realm"), Resolver: str("resolver")}
	req.SortBy = str("sortby")
	req.Desc = strings.EqualFold(str("sortdir"), "desc")
	if req.Page, req.PageSize, err = c.pageParams(); err != nil {
		return req, false, err
	}
	csvOut := strings.EqualFold(str("outform"), "csv")
	if csvOut {
		req.PageSize = 0
	}
	return req, csvOut, nil
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
