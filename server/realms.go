package server

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/realm"
)

// realmJSON renders a realm as GET /realm/ shows it.
func realmJSON(r authsrv.RealmInfo) map[string]any {
	entries := []map[string]any{}
	for _, e := range r.Resolvers {
		// privacyIDEA sends null for an entry without priority.
		m := map[string]any{"name": e.Name, "node": e.Node, "priority": nil}
		if e.Priority != nil {
			m["priority"] = *e.Priority
		}
		if t, ok := r.ResolverTypes[e.Name]; ok {
			m["type"] = t
		}
		entries = append(entries, m)
	}
	return map[string]any{"id": r.ID, "default": r.Default, "resolver": entries}
}

// getRealms is GET /realm/ (authsrv.Ops.Realms).
func getRealms(c *call) (answer, error) {
	list, err := c.a.s.Ops().Realms(c.ctx, c.caller())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := map[string]any{}
	for _, r := range list {
		out[r.Name] = realmJSON(r)
	}
	return answer{value: out}, nil
}

// getSuperuserRealms is GET /realm/superuser
// (authsrv.Ops.SuperuserRealms).
func getSuperuserRealms(c *call) (answer, error) {
	list, err := c.a.s.Ops().SuperuserRealms(c.ctx, c.caller())
	c.ran()
	return answer{value: nonNil(list)}, err
}

// priority reads priority.<resolver>: JSON integers and, unlike
// privacyIDEA, form integers too.
func (c *call) priority(name string) (*int, error) {
	raw, ok := c.p.raw("priority." + name)
	if !ok {
		return nil, nil
	}
	var s string
	switch v := raw.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = strings.TrimSpace(v)
	case nil:
		return nil, nil
	default:
		return nil, apierr.New(apierr.Parameter, "priority."+name+" must be an integer")
	}
	if s == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, apierr.New(apierr.Parameter, "priority."+name+" must be an integer")
	}
	return &n, nil
}

// postRealm is POST /realm/{realm}.
func postRealm(c *call) (answer, error) {
	name, entries, err := c.realmParams()
	if err != nil {
		return answer{}, c.refused("resolverwrite", err)
	}
	added, failed, err := c.a.s.Ops().SetRealm(c.ctx, c.caller(), name, entries)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: map[string]any{"added": added, "failed": failed}}, nil
}

// realmParams reads POST /realm/{realm}: "resolvers" (a list or CSV) and
// their priority.<resolver>.
func (c *call) realmParams() (string, []realm.Entry, error) {
	name, err := c.p.required("realm")
	if err != nil {
		return "", nil, err
	}
	names, err := c.p.list("resolvers")
	if err != nil {
		return "", nil, err
	}
	var entries []realm.Entry
	for _, n := range names {
		prio, err := c.priority(n)
		if err != nil {
			return "", nil, err
		}
		entries = append(entries, realm.Entry{Name: n, Priority: prio})
	}
	return name, entries, nil
}

// postRealmNode is POST /realm/{realm}/node/{nodeid}.
func postRealmNode(c *call) (answer, error) {
	name, node, entries, err := c.realmNodeParams()
	if err != nil {
		return answer{}, c.refused("resolverwrite", err)
	}
	added, failed, err := c.a.s.Ops().SetRealmNode(c.ctx, c.caller(), name, node, entries)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: map[string]any{"added": added, "failed": failed}}, nil
}

// realmNodeParams reads POST /realm/{realm}/node/{nodeid}: a JSON list
// "resolver" of {"name", "priority"} objects.
func (c *call) realmNodeParams() (name, node string, entries []realm.Entry, err error) {
	if name, err = c.p.required("realm"); err != nil {
		return "", "", nil, err
	}
	node, _ = c.p.str("nodeid")
	raw, ok := c.p.raw("resolver")
	list, isList := raw.([]any)
	if !ok || !isList {
		return "", "", nil, realm.ErrBadData
	}
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return "", "", nil, realm.ErrBadData
		}
		n, ok := m["name"].(string)
		if !ok || n == "" {
			return "", "", nil, realm.ErrBadData
		}
		e := realm.Entry{Name: n}
		switch p := m["priority"].(type) {
		case nil:
		case json.Number:
			v, err := strconv.Atoi(p.String())
			if err != nil {
				return "", "", nil, realm.ErrBadData
			}
			e.Priority = &v
		default:
			return "", "", nil, realm.ErrBadData
		}
		entries = append(entries, e)
	}
	return name, node, entries, nil
}

// deleteRealm is DELETE /realm/{realm}.
func deleteRealm(c *call) (answer, error) {
	name, err := c.p.required("realm")
	if err != nil {
		return answer{}, c.refused("resolverdelete", err)
	}
	withAttrs, err := c.p.boolean("delete_custom_attributes")
	if err != nil {
		return answer{}, c.refused("resolverdelete", err)
	}
	id, err := c.a.s.Ops().DeleteRealm(c.ctx, c.caller(), name, withAttrs)
	c.ran()
	return answer{value: id}, err
}

// getDefaultRealm is GET /defaultrealm (authsrv.Ops.DefaultRealm).
func getDefaultRealm(c *call) (answer, error) {
	r, ok, err := c.a.s.Ops().DefaultRealm(c.ctx, c.caller())
	c.ran()
	if err != nil || !ok {
		return answer{value: map[string]any{}}, err
	}
	return answer{value: map[string]any{r.Name: realmJSON(r)}}, nil
}

// postDefaultRealm is POST /defaultrealm/{realm}.
func postDefaultRealm(c *call) (answer, error) {
	name, err := c.p.required("realm")
	if err != nil {
		return answer{}, c.refused("resolverwrite", err)
	}
	id, err := c.a.s.Ops().SetDefaultRealm(c.ctx, c.caller(), name)
	c.ran()
	return answer{value: id}, err
}

// deleteDefaultRealm is DELETE /defaultrealm.
func deleteDefaultRealm(c *call) (answer, error) {
	id, err := c.a.s.Ops().ClearDefaultRealm(c.ctx, c.caller())
	c.ran()
	return answer{value: id}, err
}
