package server

import (
	"encoding/json"
	"fmt"

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
		switch v := raw.(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = map[bool]string{true: "True", false: "False"}[v]
		case nil:
			out[k] = ""
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, apierr.New(apierr.Parameter, "parameter "+k+" cannot be read")
			}
			out[k] = string(b)
		}
	}
	return out, nil
}

func resolverJSON(d resolver.Def) map[string]any {
	return map[string]any{"resolvername": d.Name, "type": d.Type, "censor_keys": nonNil(d.CensorKeys), "data": d.Data}
}

// getResolvers is GET /resolver/ and GET /resolver/{resolver}.
func getResolvers(c *call) (answer, error) {
	typ, err := c.p.str("type")
	if err != nil {
		return answer{}, err
	}
	editable, err := c.p.boolean("editable")
	if err != nil {
		return answer{}, err
	}
	name, _ := c.p.str("resolvername")
	out := map[string]any{}
	if name != "" {
		d, ok, err := c.a.s.Resolvers().Get(c.ctx, name)
		if err != nil || !ok || (typ != "" && d.Type != typ) {
			return answer{value: out}, err
		}
		if editable {
			list, err := c.a.s.Resolvers().List(c.ctx, d.Type, true)
			if err != nil {
				return answer{}, err
			}
			found := false
			for _, e := range list {
				found = found || e.Name == d.Name
			}
			if !found {
				return answer{value: out}, nil
			}
		}
		out[d.Name] = resolverJSON(d)
		return answer{value: out}, nil
	}
	list, err := c.a.s.Resolvers().List(c.ctx, typ, editable)
	if err != nil {
		return answer{}, err
	}
	for _, d := range list {
		out[d.Name] = resolverJSON(d)
	}
	return answer{value: out}, nil
}

// getResolverDefaults is GET /resolver/{type}/default: the default
// configuration of a type (none of ours has template values). The type
// arrives as the path segment "resolvername".
func getResolverDefaults(c *call) (answer, error) {
	typ, _ := c.p.str("resolvername")
	for _, t := range c.a.s.Resolvers().Types() {
		if t == typ {
			return answer{value: map[string]any{}}, nil
		}
	}
	return answer{}, apierr.New(apierr.Parameter, fmt.Sprintf("resolver type : %s not in %v", typ, c.a.s.Resolvers().Types()))
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

// postResolverTest is POST /resolver/test.
func postResolverTest(c *call) (answer, error) {
	// A test changes nothing: the right is checked here, and the request
	// audited by the HTTP wrapper.
	if err := c.authorize("resolverwrite"); err != nil {
		return answer{}, err
	}
	// "resolver" names a stored resolver whose secrets fill in censored
	// values; the path segment is "resolvername".
	stored, err := c.p.str("resolver")
	if err != nil {
		return answer{}, err
	}
	params, err := c.configParams("resolver", "resolvername")
	if err != nil {
		return answer{}, err
	}
	value, desc, err := c.a.s.Resolvers().Test(c.ctx, params, stored)
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
