package server

import (
	"encoding/json"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/resolver"
)

// configParams turns the request's parameters into a resolver (or other
// definition) configuration: every value as text, JSON booleans as
// True/False, JSON objects and lists as JSON text. Keys in skip are left
// out.
func (c *call) configParams(skip ...string) (map[string]string, error) {
	out := map[string]string{}
next:
	for _, k := range c.p.keys() {
		for _, s := range skip {
			if k == s {
				continue next
			}
		}
		raw, _ := c.p.raw(k)
		v, err := configString(k, raw)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// configString is one parameter as configParams gives it: strings as
// they are, JSON numbers as their text, booleans as Python writes them,
// null as "", other JSON values as JSON.
func configString(k string, raw any) (string, error) {
	switch v := raw.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		if v {
			return "True", nil
		}
		return "False", nil
	case nil:
		return "", nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "", apierr.New(apierr.Parameter, "parameter "+k+" cannot be read")
		}
		return string(b), nil
	}
}

func resolverJSON(d resolver.Def) map[string]any {
	return map[string]any{"resolvername": d.Name, "type": d.Type, "censor_keys": nonNil(d.CensorKeys), "data": d.Data}
}

// getResolvers is GET /resolver/ and GET /resolver/{resolver}
// (authsrv.Ops.Resolvers).
func getResolvers(c *call) (answer, error) {
	var req authsrv.ResolverListRequest
	var err error
	if req.Type, err = c.p.str("type"); err != nil {
		return answer{}, c.refused("resolverread", err)
	}
	if req.Editable, err = c.p.boolean("editable"); err != nil {
		return answer{}, c.refused("resolverread", err)
	}
	req.Name, _ = c.p.str("resolvername")
	list, err := c.a.s.Ops().Resolvers(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := map[string]any{}
	for _, d := range list {
		out[d.Name] = resolverJSON(d)
	}
	return answer{value: out}, nil
}

// getResolverDefaults is GET /resolver/{type}/default
// (authsrv.Ops.ResolverDefaults). The type arrives as the path segment
// "resolvername".
func getResolverDefaults(c *call) (answer, error) {
	typ, _ := c.p.str("resolvername")
	v, err := c.a.s.Ops().ResolverDefaults(c.ctx, c.caller(), typ)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: v}, nil
}

// postResolver is POST /resolver/{resolver}; POST /resolver/test shares
// the route (httprouter cannot have both) and is dispatched here.
func postResolver(c *call) (answer, error) {
	name, err := c.p.required("resolvername")
	if err != nil {
		return answer{}, c.refused("resolverwrite", err)
	}
	if name == "test" {
		return postResolverTest(c)
	}
	params, err := c.configParams("resolver", "resolvername")
	if err != nil {
		return answer{}, c.refused("resolverwrite", err)
	}
	id, err := c.a.s.Ops().SetResolver(c.ctx, c.caller(), name, params)
	c.ran()
	return answer{value: id}, err
}

// postResolverTest is POST /resolver/test (authsrv.Ops.TestResolver).
func postResolverTest(c *call) (answer, error) {
	// "resolver" names a stored resolver whose secrets fill in censored
	// values; the path segment is "resolvername".
	stored, err := c.p.str("resolver")
	if err != nil {
		return answer{}, c.refused("resolverwrite", err)
	}
	params, err := c.configParams("resolver", "resolvername")
	if err != nil {
		return answer{}, c.refused("resolverwrite", err)
	}
	value, desc, err := c.a.s.Ops().TestResolver(c.ctx, c.caller(), params, stored)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: value, detail: map[string]any{"description": desc}}, nil
}

// deleteResolver is DELETE /resolver/{resolver}.
func deleteResolver(c *call) (answer, error) {
	name, err := c.p.required("resolvername")
	if err != nil {
		return answer{}, c.refused("resolverdelete", err)
	}
	id, err := c.a.s.Ops().DeleteResolver(c.ctx, c.caller(), name)
	c.ran()
	return answer{value: id}, err
}
