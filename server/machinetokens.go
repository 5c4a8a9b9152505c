package server

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/machine"
)

// The machine tokens, the applications and their authentication items:
// /machine/token, /machine/tokenoption, /machine/authitem, /application/
// and privacyideaadm's /machine/deltoken and /machine/deloption
// (authsrv.Ops.AttachMachineToken and friends).

const rightMachineTokens = "manage_machine_tokens"

// machineKeys are the parameters that select a machine token; every
// other parameter of an attach or an option change is an option.
var machineKeys = []string{"hostname", "machineid", "resolver", "serial", "application"}

// optionValue renders a parameter as a stored option: JSON numbers as
// their text, booleans as Python prints them; null is "".
func optionValue(key string, v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		if v {
			return "True", nil
		}
		return "False", nil
	}
	return "", typeError(key, "a string")
}

// machineOptions splits the request's other parameters (all but skip)
// into options to set (non-empty values) and options to delete (empty
// values).
func (c *call) machineOptions(skip ...string) (set map[string]string, del []string, err error) {
	set = map[string]string{}
	for _, k := range c.p.keys() {
		if slices.Contains(skip, k) {
			continue
		}
		v, _ := c.p.raw(k)
		s, err := optionValue(k, v)
		if err != nil {
			return nil, nil, err
		}
		if s == "" {
			del = append(del, k)
			continue
		}
		set[k] = s
	}
	slices.Sort(del)
	return set, del, nil
}

// machineRef reads the machine of a request: hostname, or machineid and
// resolver. privacyideaadm names the host "name"; it counts as the
// hostname when nothing else names a machine.
func (c *call) machineRef(nameIsHost bool) (machine.MachineRef, error) {
	var m machine.MachineRef
	var err error
	for _, f := range []struct {
		dst *string
		key string
	}{{&m.Hostname, "hostname"}, {&m.MachineID, "machineid"}, {&m.Resolver, "resolver"}} {
		if *f.dst, err = c.p.str(f.key); err != nil {
			return m, err
		}
	}
	if nameIsHost && m.Hostname == "" && m.MachineID == "" && m.Resolver == "" {
		if m.Hostname, err = c.p.str("name"); err != nil {
			return m, err
		}
	}
	return m, nil
}

// usesNameAsHost reports whether privacyideaadm's "name" stands for the
// hostname in this request.
func (c *call) usesNameAsHost() bool {
	for _, k := range []string{"hostname", "machineid", "resolver"} {
		if c.p.has(k) {
			return false
		}
	}
	return c.p.has("name")
}

// postMachineToken is POST /machine/token: attach a token; value is the
// machine token's id.
func postMachineToken(c *call) (answer, error) {
	serial, err := c.p.required("serial")
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	app, err := c.p.required("application")
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	nameIsHost := c.usesNameAsHost()
	m, err := c.machineRef(nameIsHost)
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	skip := machineKeys
	if nameIsHost {
		skip = append(slices.Clone(machineKeys), "name")
	}
	opts, empty, err := c.machineOptions(skip...)
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	for _, k := range empty {
		opts[k] = ""
	}
	id, err := c.a.s.Ops().AttachMachineToken(c.ctx, c.caller(), machine.AttachRequest{Serial: serial, Application: app, Machine: m, Options: opts})
	c.ran()
	return answer{value: id}, err
}

// deleteMachineToken is DELETE /machine/token/{serial}/{machineid}/
// {resolver}/{application} and DELETE /machine/token/{serial}/
// {application}/{mtid}: value is the number removed.
func deleteMachineToken(c *call) (answer, error) {
	serial, _ := c.p.str("serial")
	rest, _ := c.p.str("rest")
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	req := machine.DetachRequest{Serial: serial}
	switch len(parts) {
	case 3:
		req.Machine = machine.MachineRef{MachineID: parts[0], Resolver: parts[1]}
		req.Application = parts[2]
	case 2:
		req.Application = parts[0]
		id, err := strconv.Atoi(parts[1])
		if err != nil || id <= 0 {
			return answer{}, c.refused(rightMachineTokens, apierr.New(apierr.Parameter, "The machine token id must be a positive integer."))
		}
		req.ID = id
	default:
		return answer{}, c.refused(rightMachineTokens, apierr.New(apierr.Parameter,
			"Use /machine/token/<serial>/<machineid>/<resolver>/<application> or /machine/token/<serial>/<application>/<mtid>."))
	}
	if req.Application == "" {
		return answer{}, c.refused(rightMachineTokens, apierr.MissingParameter("application"))
	}
	n, err := c.a.s.Ops().DetachMachineTokens(c.ctx, c.caller(), req)
	c.ran()
	return answer{value: n}, err
}

// postMachineDelToken is privacyideaadm's POST /machine/deltoken (name or
// hostname, or machineid and resolver; serial; application): value is
// the number removed.
func postMachineDelToken(c *call) (answer, error) {
	serial, err := c.p.required("serial")
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	app, err := c.p.required("application")
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	m, err := c.machineRef(true)
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	n, err := c.a.s.Ops().DetachMachineTokens(c.ctx, c.caller(), machine.DetachRequest{Serial: serial, Application: app, Machine: m})
	c.ran()
	return answer{value: n}, err
}

// postMachineTokenOption is POST /machine/tokenoption: the other
// parameters with a value set options, the empty ones delete them; value
// {"added": n, "deleted": m}.
func postMachineTokenOption(c *call) (answer, error) {
	mtid, err := c.p.integer("mtid", 0)
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	req := machine.OptionRequest{ID: mtid}
	if req.Serial, err = c.p.str("serial"); err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	if req.Application, err = c.p.str("application"); err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	if mtid == 0 {
		if _, err := c.p.required("serial"); err != nil {
			return answer{}, c.refused(rightMachineTokens, err)
		}
		if _, err := c.p.required("application"); err != nil {
			return answer{}, c.refused(rightMachineTokens, err)
		}
	}
	nameIsHost := c.usesNameAsHost()
	if req.Machine, err = c.machineRef(nameIsHost); err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	skip := append(slices.Clone(machineKeys), "mtid")
	if nameIsHost {
		skip = append(skip, "name")
	}
	if req.Set, req.Delete, err = c.machineOptions(skip...); err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	added, deleted, err := c.a.s.Ops().SetMachineTokenOptions(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: map[string]any{"added": added, "deleted": deleted}}, nil
}

// postMachineDelOption is privacyideaadm's POST /machine/deloption (name
// or hostname, or machineid and resolver; serial; application; key):
// value is the number of options deleted.
func postMachineDelOption(c *call) (answer, error) {
	req := machine.OptionRequest{}
	var err error
	for _, f := range []struct {
		dst *string
		key string
	}{{&req.Serial, "serial"}, {&req.Application, "application"}} {
		if *f.dst, err = c.p.required(f.key); err != nil {
			return answer{}, c.refused(rightMachineTokens, err)
		}
	}
	key, err := c.p.required("key")
	if err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	req.Delete = []string{key}
	if req.Machine, err = c.machineRef(true); err != nil {
		return answer{}, c.refused(rightMachineTokens, err)
	}
	_, deleted, err := c.a.s.Ops().SetMachineTokenOptions(c.ctx, c.caller(), req)
	c.ran()
	return answer{value: deleted}, err
}

// listKeys are the parameters of GET /machine/token that are not option
// filters.
var listKeys = []string{"hostname", "machineid", "resolver", "serial", "application", "sortby", "sortdir", "page", "pagesize"}

// getMachineTokens is GET /machine/token: with only a serial, the
// machines of that token; otherwise the machine tokens the filters
// select (no pagination: page and pagesize are ignored).
func getMachineTokens(c *call) (answer, error) {
	var q machine.Query
	var err error
	fail := func(err error) (answer, error) { return answer{}, c.refused(rightMachineTokens, err) }
	if q.Machine, err = c.machineRef(false); err != nil {
		return fail(err)
	}
	if q.Serial, err = c.p.str("serial"); err != nil {
		return fail(err)
	}
	if q.Application, err = c.p.str("application"); err != nil {
		return fail(err)
	}
	if q.SortBy, err = c.p.str("sortby"); err != nil {
		return fail(err)
	}
	dir, err := c.p.str("sortdir")
	if err != nil {
		return fail(err)
	}
	q.Desc = strings.EqualFold(dir, "desc")
	if q.Options, _, err = c.machineOptions(listKeys...); err != nil {
		return fail(err)
	}
	if len(q.Options) == 0 {
		q.Options = nil
	}
	byToken := q.Serial != "" && !strings.Contains(q.Serial, "*") && q.Machine == (machine.MachineRef{}) &&
		q.Application == "" && q.Options == nil
	if byToken {
		list, err := c.a.s.Ops().MachinesOfToken(c.ctx, c.caller(), q.Serial)
		c.ran()
		if err != nil {
			return answer{}, err
		}
		out := make([]any, 0, len(list))
		for _, tm := range list {
			out = append(out, map[string]any{
				"machine_id": tm.MachineID, "hostname": tm.Hostname, "application": tm.Application,
				"resolver": tm.Resolver, "options": optionsJSON(tm.Options), "id": tm.ID, "serial": tm.Serial,
			})
		}
		return answer{value: out}, nil
	}
	res, err := c.a.s.Ops().MachineTokens(c.ctx, c.caller(), q)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make([]any, 0, len(res.Tokens))
	for _, l := range res.Tokens {
		out = append(out, map[string]any{
			"serial": l.Serial, "machine_id": strOrNil(res.MachineID), "resolver": strOrNil(res.Resolver),
			"type": l.Type, "application": l.Application, "id": l.ID, "options": optionsJSON(l.Options),
		})
	}
	return answer{value: out}, nil
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func optionsJSON(opts map[string]string) map[string]any {
	out := make(map[string]any, len(opts))
	for k, v := range opts {
		out[k] = v
	}
	return out
}

// getMachineAuthItems is GET /machine/authitem[/{application}]: the
// authentication items of the machine tokens of hostname (or of a
// service_id filter), per application; nothing is {}.
func getMachineAuthItems(c *call) (answer, error) {
	var req machine.AuthItemRequest
	var err error
	fail := func(err error) (answer, error) { return answer{}, c.refused(rightAuthItems, err) }
	if req.Hostname, err = c.p.required("hostname"); err != nil {
		return fail(err)
	}
	for _, f := range []struct {
		dst *string
		key string
	}{{&req.Application, "application"}, {&req.Challenge, "challenge"}, {&req.Serial, "serial"}} {
		if *f.dst, err = c.p.str(f.key); err != nil {
			return fail(err)
		}
	}
	if req.Filter, _, err = c.machineOptions("hostname", "application", "challenge", "serial"); err != nil {
		return fail(err)
	}
	req.UserAgent = c.r.UserAgent()
	items, err := c.a.s.Ops().MachineAuthItems(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make(map[string]any, len(items))
	for app, list := range items {
		l := make([]any, 0, len(list))
		for _, it := range list {
			l = append(l, it)
		}
		out[app] = l
	}
	return answer{value: out}, nil
}

const rightAuthItems = "fetch_authentication_items"

// getApplications is GET /application/: per application its options per
// token type.
func getApplications(c *call) (answer, error) {
	apps, err := c.a.s.Ops().MachineApplications(c.ctx, c.caller())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make(map[string]any, len(apps))
	for name, a := range apps {
		types := map[string]any{}
		for typ, opts := range a["options"] {
			o := make(map[string]any, len(opts))
			for k, spec := range opts {
				m := map[string]any{"type": spec.Type}
				if spec.Description != "" {
					m["description"] = spec.Description
				}
				if spec.Value != nil {
					m["value"] = spec.Value
				}
				o[k] = m
			}
			types[typ] = o
		}
		out[name] = map[string]any{"options": types}
	}
	return answer{value: out}, nil
}
