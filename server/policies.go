package server

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

// policyJSON renders a policy with the product description's types:
// action and the realm/resolver/adminrealm/adminuser/client lists as comma
// joined strings, user and pinode as lists, conditions as 5-element lists.
func policyJSON(p policy.Policy) map[string]any {
	conds := []any{}
	for _, c := range p.Conditions {
		conds = append(conds, []any{c.Section, c.Key, c.Comparator, c.Value, c.Active})
	}
	return map[string]any{
		"id": p.ID, "name": p.Name, "scope": p.Scope, "priority": p.Priority, "description": p.Description,
		"action": p.Action, "realm": strings.Join(p.Realm, ", "), "resolver": strings.Join(p.Resolver, ", "),
		"adminrealm": strings.Join(p.AdminRealm, ", "), "adminuser": strings.Join(p.AdminUser, ", "),
		"client": strings.Join(p.Client, ", "), "user": nonNil(p.User), "pinode": nonNil(p.PINode),
		"user_agents": nonNil(p.UserAgents), "time": p.Time, "active": p.Active,
		"check_all_resolvers": p.CheckAllResolvers, "user_case_insensitive": p.UserCaseInsensitive,
		"conditions": conds,
	}
}

// queryParam reads a query key case-insensitively (privacyIDEA's policy
// list filters are).
func (c *call) queryParam(key string) (string, error) {
	for _, k := range c.p.keys() {
		if strings.EqualFold(k, key) {
			return c.p.str(k)
		}
	}
	return "", nil
}

// getPolicyRoute serves GET /policy/{name}: a policy, or the static
// children check and defs that httprouter cannot register beside it.
func getPolicyRoute(c *call) (answer, error) {
	name, _ := c.p.str("name")
	switch name {
	case "check":
		return policyCheck(c)
	case "defs":
		return policyDefs(c, "")
	}
	return getPolicies(c)
}

// getPolicySub serves GET /policy/defs/{scope} and GET
// /policy/export/{file}.
func getPolicySub(c *call) (answer, error) {
	name, _ := c.p.str("name")
	sub, _ := c.p.str("sub")
	switch name {
	case "defs":
		return policyDefs(c, sub)
	case "export":
		return policyExport(c, sub)
	}
	return answer{}, c.refused("policyread", apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server."))
}

// getPolicies is GET /policy/ and GET /policy/{name}
// (authsrv.Ops.Policies): an object keyed by policy name; an unknown name
// gives {}.
func getPolicies(c *call) (answer, error) {
	f, err := c.policyFilter()
	if err != nil {
		return answer{}, c.refused("policyread", err)
	}
	list, err := c.a.s.Ops().Policies(c.ctx, c.caller(), f)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := map[string]any{}
	for _, p := range list {
		out[p.Name] = policyJSON(p)
	}
	return answer{value: out}, nil
}

// policyFilter reads the filters of GET /policy/.
func (c *call) policyFilter() (policy.Filter, error) {
	var f policy.Filter
	var err error
	if f.Name, err = c.p.str("name"); err != nil {
		return f, err
	}
	if f.Scope, err = c.queryParam("scope"); err != nil {
		return f, err
	}
	if f.Realm, err = c.queryParam("realm"); err != nil {
		return f, err
	}
	if a, err := c.queryParam("active"); err != nil {
		return f, err
	} else if a != "" {
		v := strings.EqualFold(a, "true") || a == "1"
		f.Active = &v
	}
	return f, nil
}

// policyDefs is GET /policy/defs[/{scope}] (authsrv.Ops.PolicyDefs).
func policyDefs(c *call, scope string) (answer, error) {
	v, err := c.a.s.Ops().PolicyDefs(c.ctx, c.caller(), scope)
	c.ran()
	return answer{value: v}, err
}

// policyExport is GET /policy/export/{file} (authsrv.Ops.ExportPolicies):
// the policies as an INI-style text attachment. The file name is only a
// download name.
func policyExport(c *call, file string) (answer, error) {
	body, err := c.a.s.Ops().ExportPolicies(c.ctx, c.caller())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{raw: func(w http.ResponseWriter) {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": safeFilename(file)}))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	}}, nil
}

// maxFilename is the longest download name sent back, in bytes.
const maxFilename = 128

// safeFilename keeps a download name free of paths and header tricks: no
// directory part (slashes, backslashes, leading dots), no control or
// format characters (line breaks, bidirectional overrides), no quote or
// semicolon (which would end the parameter), at most maxFilename bytes
// cut on a character boundary; an empty result is policies.cfg. The
// caller still encodes it with mime.FormatMediaType.
func safeFilename(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), r == utf8.RuneError,
			r == '"' || r == '\\' || r == '/' || r == ';':
			return -1
		}
		return r
	}, s)
	s = strings.Trim(s, ". ")
	if len(s) > maxFilename {
		cut := maxFilename
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = strings.TrimRight(s[:cut], ". ")
	}
	if s == "" {
		s = "policies.cfg"
	}
	return s
}

// policyCheck is GET /policy/check (authsrv.Ops.CheckPolicies).
func policyCheck(c *call) (answer, error) {
	var req authsrv.PolicyCheck
	for k, dst := range map[string]*string{"user": &req.User, "realm": &req.Realm, "scope": &req.Scope, "action": &req.Action} {
		v, err := c.p.str(k)
		if err != nil {
			return answer{}, c.refused("policyread", err)
		}
		*dst = v
	}
	var err error
	if req.Resolver, err = c.p.str("resolver"); err != nil {
		return answer{}, c.refused("policyread", err)
	}
	if cs, err := c.p.str("client"); err != nil {
		return answer{}, c.refused("policyread", err)
	} else if cs != "" {
		if req.Client, err = parseAddr(cs); err != nil {
			return answer{}, c.refused("policyread", err)
		}
	}
	ps, err := c.a.s.Ops().CheckPolicies(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	if len(ps) == 0 {
		return answer{value: map[string]any{"allowed": false, "info": "No policies found"}}, nil
	}
	out := map[string]any{}
	for _, p := range ps {
		out[p.Name] = policyJSON(p)
	}
	return answer{value: map[string]any{"allowed": true, "policy": out}}, nil
}

// strOrList reads a parameter given as a CSV string or a JSON list.
func (c *call) strOrList(key string) ([]string, bool, error) {
	if !c.p.has(key) {
		return nil, false, nil
	}
	l, err := c.p.list(key)
	return nonNil(l), true, err
}

// actionParam reads "action": a string, a JSON list (joined with ", ") or
// a JSON object (true → bare key, else key=value).
func (c *call) actionParam() (string, bool, error) {
	raw, ok := c.p.raw("action")
	if !ok {
		return "", false, nil
	}
	switch v := raw.(type) {
	case string:
		return v, true, nil
	case []any:
		parts := make([]string, 0, len(v))
		for _, it := range v {
			s, ok := it.(string)
			if !ok {
				return "", false, apierr.New(apierr.Parameter, "action list entries must be strings")
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ", "), true, nil
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			switch y := x.(type) {
			case bool:
				if y {
					m[k] = true
				} else {
					m[k] = "False"
				}
			case string:
				m[k] = y
			case json.Number:
				m[k] = y.String()
			default:
				return "", false, apierr.New(apierr.Parameter, "action values must be strings, numbers or true")
			}
		}
		return policy.FormatActions(m), true, nil
	case nil:
		return "", true, nil
	}
	return "", false, apierr.New(apierr.Parameter, "action must be a string, a list or an object")
}

// conditionsParam reads "conditions": a JSON list of 5- or 6-element lists.
func (c *call) conditionsParam(name string) ([]policy.Condition, bool, error) {
	raw, ok := c.p.raw("conditions")
	if !ok {
		return nil, false, nil
	}
	if s, isStr := raw.(string); isStr {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, false, apierr.New(apierr.Parameter, "conditions must be a JSON list")
		}
		raw = v
	}
	list, isList := raw.([]any)
	if !isList {
		return nil, false, apierr.New(apierr.Parameter, "conditions must be a list")
	}
	out := []policy.Condition{}
	for _, it := range list {
		c5, ok := it.([]any)
		if !ok || (len(c5) != 5 && len(c5) != 6) {
			n := 0
			if ok {
				n = len(c5)
			}
			return nil, false, apierr.New(apierr.Parameter, fmt.Sprintf("Condition of policy '%s' has %d values, but should have 5 or 6.", name, n))
		}
		var strs [4]string
		for i := range 4 {
			s, ok := c5[i].(string)
			if !ok {
				s = fmt.Sprint(c5[i])
			}
			strs[i] = s
		}
		active, ok := c5[4].(bool)
		if !ok {
			return nil, false, apierr.New(apierr.Parameter, fmt.Sprintf("Invalid condition of policy '%s': Active must be a boolean.", name))
		}
		cond := policy.Condition{Section: strs[0], Key: strs[1], Comparator: strs[2], Value: strs[3], Active: active}
		if len(c5) == 6 {
			m, ok := c5[5].(string)
			if !ok {
				return nil, false, apierr.New(apierr.Parameter, fmt.Sprintf("Invalid condition of policy '%s': Unknown handle missing data value '%v'!", name, c5[5]))
			}
			cond.MissingData = m
		}
		out = append(out, cond)
	}
	return out, true, nil
}

// postPolicyRoute serves POST /policy/{name}: the request's fields over
// the stored policy (authsrv.Ops.UpdatePolicy).
func postPolicyRoute(c *call) (answer, error) {
	name, u, err := c.policyUpdate()
	if err != nil {
		return answer{}, c.refused("policywrite", err)
	}
	id, err := c.a.s.Ops().UpdatePolicy(c.ctx, c.caller(), name, u)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: map[string]any{"setPolicy " + name: id}}, nil
}

// policyUpdate reads POST /policy/{name}: the attributes it sends (the
// library merges them over the stored policy).
func (c *call) policyUpdate() (string, authsrv.PolicyUpdate, error) {
	var u authsrv.PolicyUpdate
	name, err := c.p.required("name")
	if err != nil {
		return name, u, err
	}
	if u.Scope, err = c.p.str("scope"); err != nil {
		return name, u, err
	}
	action, gotAction, err := c.actionParam()
	if err != nil {
		return name, u, err
	}
	if gotAction {
		u.Action = &action
	}
	for key, dst := range map[string]**[]string{
		"realm": &u.Realm, "resolver": &u.Resolver, "user": &u.User, "adminrealm": &u.AdminRealm,
		"adminuser": &u.AdminUser, "client": &u.Client, "pinode": &u.PINode, "user_agents": &u.UserAgents,
	} {
		v, ok, err := c.strOrList(key)
		if err != nil {
			return name, u, err
		}
		if ok {
			*dst = &v
		}
	}
	if c.p.has("time") {
		t, err := c.p.str("time")
		if err != nil {
			return name, u, err
		}
		u.Time = &t
	}
	if c.p.has("priority") {
		n, err := c.p.integer("priority", 1)
		if err != nil {
			return name, u, err
		}
		u.Priority = &n
	}
	if c.p.has("active") {
		b, err := c.p.boolean("active")
		if err != nil {
			return name, u, err
		}
		u.Active = &b
	}
	if u.CheckAllResolvers, err = c.p.boolean("check_all_resolvers"); err != nil {
		return name, u, err
	}
	if u.UserCaseInsensitive, err = c.p.boolean("user_case_insensitive"); err != nil {
		return name, u, err
	}
	if u.Description, err = c.p.str("description"); err != nil {
		return name, u, err
	}
	if conds, ok, err := c.conditionsParam(name); err != nil {
		return name, u, err
	} else if ok {
		u.Conditions = &conds
	}
	return name, u, nil
}

// postPolicySub serves POST /policy/enable/{name}, /policy/disable/{name}
// and /policy/import/{file}.
func postPolicySub(c *call) (answer, error) {
	verb, _ := c.p.str("name")
	arg, _ := c.p.str("sub")
	ops, who := c.a.s.Ops(), c.caller()
	var id int
	var err error
	switch verb {
	case "enable":
		id, err = ops.EnablePolicy(c.ctx, who, arg)
	case "disable":
		id, err = ops.DisablePolicy(c.ctx, who, arg)
	case "import":
		data, _, ok := c.p.file("file")
		if !ok {
			s, err := c.p.str("file")
			if err != nil {
				return answer{}, c.refused("policywrite", err)
			}
			data = []byte(s)
		}
		id, err = ops.ImportPolicies(c.ctx, who, data)
	default:
		return answer{}, c.refused("policywrite", apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server."))
	}
	c.ran()
	return answer{value: id}, err
}

// patchPolicy is PATCH /policy/{oldname}: renames a policy to the body's
// "name".
func patchPolicy(c *call) (answer, error) {
	old, err := c.p.required("oldname")
	if err != nil {
		return answer{}, c.refused("policywrite", err)
	}
	newName, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("policywrite", err)
	}
	id, err := c.a.s.Ops().RenamePolicy(c.ctx, c.caller(), old, newName)
	c.ran()
	return answer{value: id}, err
}

// deletePolicy is DELETE /policy/{name}.
func deletePolicy(c *call) (answer, error) {
	name, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("policydelete", err)
	}
	id, err := c.a.s.Ops().DeletePolicy(c.ctx, c.caller(), name)
	c.ran()
	return answer{value: id}, err
}
