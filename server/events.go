package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/eventing"
)

// The event handler definitions: /event/... (authsrv.Ops.EventDefinitions
// and friends).

const (
	rightEventRead  = "eventhandling_read"
	rightEventWrite = "eventhandling_write"
)

// eventJSON is a definition as GET /event/ answers it.
func eventJSON(d eventing.Definition) map[string]any {
	return map[string]any{
		"id": d.ID, "name": d.Name, "active": d.Active, "ordering": d.Ordering, "position": d.Position,
		"abort_on_error": d.AbortOnError, "handlermodule": d.HandlerModule, "action": d.Action,
		"condition": d.Condition, "event": d.Events, "options": d.Options, "conditions": d.Conditions,
	}
}

// getEvents is GET /event/.
func getEvents(c *call) (answer, error) { return c.listEvents(0) }

func (c *call) listEvents(id int) (answer, error) {
	list, err := c.a.s.Ops().EventDefinitions(c.ctx, c.caller(), id)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make([]any, len(list))
	for i, d := range list {
		out[i] = eventJSON(d)
	}
	return answer{value: out}, nil
}

// getEventRoute is GET /event/{id}, /event/available and
// /event/handlermodules.
func getEventRoute(c *call) (answer, error) {
	sub, _ := c.p.str("eventid")
	switch sub {
	case "available", "handlermodules":
		return c.eventInfo(sub, "")
	}
	id, err := strconv.Atoi(sub)
	if err != nil || id <= 0 {
		// privacyIDEA answers an empty list for an id it does not know.
		id = -1
	}
	if id < 0 {
		if err := c.authorize(rightEventRead); err != nil {
			return answer{}, err
		}
		return answer{value: []any{}}, nil
	}
	return c.listEvents(id)
}

// getEventSub is GET /event/{positions,defaults,actions,conditions}/{module}.
func getEventSub(c *call) (answer, error) {
	what, _ := c.p.str("eventid")
	module, _ := c.p.str("module")
	switch what {
	case "positions", "defaults", "actions", "conditions":
		return c.eventInfo(what, module)
	}
	return answer{}, c.refused(rightEventRead, eventing.ErrNotFound)
}

func (c *call) eventInfo(what, module string) (answer, error) {
	v, err := c.a.s.Ops().EventInfo(c.ctx, c.caller(), what, module)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: v}, nil
}

// eventParams reads a definition from POST /event: whether abort_on_error
// was given is returned too (its default is the module's).
func (c *call) eventParams() (eventing.Definition, bool, error) {
	var d eventing.Definition
	var err error
	if d.Name, err = c.p.required("name"); err != nil {
		return d, false, err
	}
	if d.Events, err = c.p.list("event"); err != nil {
		return d, false, err
	}
	if len(d.Events) == 0 {
		return d, false, apierr.MissingParameter("event")
	}
	if d.HandlerModule, err = c.p.required("handlermodule"); err != nil {
		return d, false, err
	}
	if d.Action, err = c.p.required("action"); err != nil {
		return d, false, err
	}
	if d.Position, err = c.p.str("position"); err != nil {
		return d, false, err
	}
	if d.Condition, err = c.p.str("condition"); err != nil {
		return d, false, err
	}
	if d.Ordering, err = c.p.integer("ordering", 0); err != nil {
		return d, false, err
	}
	d.Active = true
	if c.p.has("active") {
		if d.Active, err = c.p.boolean("active"); err != nil {
			return d, false, err
		}
	}
	abortSet := c.p.has("abort_on_error")
	if abortSet {
		if d.AbortOnError, err = c.p.boolean("abort_on_error"); err != nil {
			return d, false, err
		}
	}
	if c.p.has("id") {
		if d.ID, err = c.p.integer("id", 0); err != nil {
			return d, false, err
		}
	}
	if d.Conditions, err = c.eventConditions(); err != nil {
		return d, false, err
	}
	d.Options = map[string]string{}
	for k, v := range c.p.prefixed("option.") {
		d.Options[strings.TrimPrefix(k, "option.")] = eventing.ParamString(v)
	}
	return d, abortSet, nil
}

// eventConditions reads the conditions parameter: a JSON object, or a
// string holding one.
func (c *call) eventConditions() (map[string]string, error) {
	errDict := apierr.New(apierr.Parameter, "The 'conditions' parameter must be a dictionary.")
	raw, ok := c.p.raw("conditions")
	if !ok || raw == nil {
		return map[string]string{}, nil
	}
	var m map[string]any
	switch v := raw.(type) {
	case map[string]any:
		m = v
	case string:
		if strings.TrimSpace(v) == "" {
			return map[string]string{}, nil
		}
		if err := json.Unmarshal([]byte(v), &m); err != nil || m == nil {
			return nil, errDict
		}
	default:
		return nil, errDict
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = eventing.ParamString(v)
	}
	return out, nil
}

// postEvent is POST /event: create, or update with id.
func postEvent(c *call) (answer, error) {
	d, abortSet, err := c.eventParams()
	if err != nil {
		return answer{}, c.refused(rightEventWrite, err)
	}
	id, err := c.a.s.Ops().SetEventDefinition(c.ctx, c.caller(), d, abortSet)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: id}, nil
}

// postEventSwitch is POST /event/enable/{id} and /event/disable/{id}.
func postEventSwitch(c *call) (answer, error) {
	verb, _ := c.p.str("eventid")
	raw, _ := c.p.str("id")
	id, err := eventing.ParseID(raw)
	if verb != "enable" && verb != "disable" {
		err = eventing.ErrNotFound
	}
	if err != nil {
		return answer{}, c.refused(rightEventWrite, err)
	}
	if verb == "enable" {
		err = c.a.s.Ops().EnableEventDefinition(c.ctx, c.caller(), id)
	} else {
		err = c.a.s.Ops().DisableEventDefinition(c.ctx, c.caller(), id)
	}
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: id}, nil
}

// deleteEvent is DELETE /event/{id}.
func deleteEvent(c *call) (answer, error) {
	raw, _ := c.p.str("eventid")
	id, err := eventing.ParseID(raw)
	if err != nil {
		return answer{}, c.refused(rightEventWrite, err)
	}
	err = c.a.s.Ops().DeleteEventDefinition(c.ctx, c.caller(), id)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: id}, nil
}

// exchanged is the answer of a request whose post event handlers changed
// the response: the changed envelope, written as it is.
func (a *api) exchanged(res *eventing.Response, auth bool) answer {
	env := envelope{ID: 1, JSONRPC: "2.0", Result: envResult{Status: res.Status, Value: res.Value},
		Version: versionText, VersionNumber: authsrv.Version, Time: unixTime(a.s.Now())}
	status := http.StatusOK
	if res.Error != nil {
		env.Result.Error = &envError{Code: res.Error.Code, Message: res.Error.Message}
		env.Result.Value = nil
		status = http.StatusBadRequest
	}
	if auth {
		env.ID = 2
		if res.Error == nil {
			env.Result.Authentication = authentication(res.Value, res.Detail)
		}
	}
	switch {
	case res.Detail != nil:
		res.Detail["threadid"] = a.seq.Add(1)
		env.Detail = res.Detail
	case res.Error != nil:
		env.Detail = noDetail
	}
	return answer{raw: func(w http.ResponseWriter) { writeEnvelope(w, status, &env) }}
}
