package eventing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/notify"
)

const federationForward = "forward"

// federation is the Federation module: after an operation it re-sends the
// request (same method, path and parameters) to a remote privacyIDEA (or
// authsrv) server and answers the remote server's response instead of
// the operation's own. The remote servers are the definitions of
// notify.Service (PIServer); the request goes through notify.PIForward,
// with the dial policy and the definition's certificate check.
//
// The parameters are those the handlers see (Call.Params, which the
// library hands over without the password) and the request's password
// (Call.Pass), which only this module sends on; they are never logged.
type federation struct{ s *Service }

func newFederation(s *Service) Module { return &federation{s: s} }

var _ Module = (*federation)(nil)

func (f *federation) Name() string        { return "Federation" }
func (f *federation) Positions() []string { return []string{Post} }
func (f *federation) DefaultAbort() bool  { return true }

func (f *federation) Actions(ctx context.Context) (map[string]map[string]OptionSpec, error) {
	servers := []string{}
	if n := f.s.cfg.Notify; n != nil {
		list, err := n.PIServers(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range list {
			servers = append(servers, d.Identifier)
		}
	}
	return map[string]map[string]OptionSpec{federationForward: {
		"privacyIDEA": {Type: "str", Required: true, Value: servers,
			Description: "The remote privacyIDEA server the request is forwarded to."},
		"realm": {Type: "str",
			Description: "Send this realm instead of the request's (a realm of the remote server)."},
		"resolver": {Type: "str",
			Description: "Send this resolver instead of the request's (a resolver of the remote server)."},
		"forward_client_ip": {Type: "bool",
			Description: "Send the client's IP address as the parameter client; otherwise the remote server sees this server as the client."},
		"forward_authorization_token": {Type: "bool",
			Description: "Send the request's authorization token, so that administrative requests can be forwarded (the remote server must accept the token)."},
	}}, nil
}

func (f *federation) Check(ctx context.Context, d Definition) error {
	if !strings.EqualFold(d.Action, federationForward) {
		return paramErr("Unknown action for Federation: " + d.Action)
	}
	id := strings.TrimSpace(d.Options["privacyIDEA"])
	if id == "" {
		return apierr.MissingParameter("privacyIDEA")
	}
	if f.s.cfg.Notify == nil {
		return nil
	}
	if _, err := f.s.cfg.Notify.PIServer(ctx, id); err != nil {
		if errors.Is(err, notify.ErrPIServerNotFound) {
			return paramErr("The privacyIDEA server " + id + " is not defined.")
		}
		return err
	}
	return nil
}

func (f *federation) Do(ctx context.Context, r *Run) error {
	if !strings.EqualFold(r.Def.Action, federationForward) {
		return paramErr("Unknown action for Federation: " + r.Def.Action)
	}
	c := r.Call
	if r.Position != Post || c.Response == nil {
		return paramErr("The Federation handler runs only after the operation (position post).")
	}
	o := r.Def.Options
	id := strings.TrimSpace(o["privacyIDEA"])
	if id == "" {
		return apierr.MissingParameter("privacyIDEA")
	}
	if f.s.cfg.Notify == nil {
		return apierr.New(apierr.ConfigAdmin, "The Federation handler has no privacyIDEA server definitions.")
	}
	log := f.s.cfg.Log.With().Str("component", "eventing").Str("handler", r.Def.Name).
		Str("privacyideaserver", id).Str("request_id", c.Caller.RequestID).Logger()
	method := strings.ToUpper(c.Method)
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		// As privacyIDEA: the operation's own answer stays.
		log.Warn().Str("method", c.Method).Msg("federation: the request's method cannot be forwarded")
		return nil
	}
	if !strings.HasPrefix(c.Path, "/") {
		return paramErr("The Federation handler cannot forward an operation without a request path.")
	}

	params := forwardParams(c.Params)
	if c.Pass != "" {
		params.Set("pass", c.Pass)
	}
	if v := strings.TrimSpace(o["realm"]); v != "" {
		params.Set("realm", v)
	}
	if v := strings.TrimSpace(o["resolver"]); v != "" {
		params.Set("resolver", v)
	}
	if IsTrue(o["forward_client_ip"]) && c.Caller.Client.IsValid() {
		params.Set("client", c.Caller.Client.Unmap().String())
	}
	var header http.Header
	if IsTrue(o["forward_authorization_token"]) {
		if tok := authorizationToken(c.Caller.Headers); tok != "" {
			header = http.Header{"Authorization": {tok}}
		}
	}

	log.Debug().Str("method", method).Str("path", c.Path).Msg("federation: forwarding the request")
	ans, err := f.s.cfg.Notify.PIForward(ctx, id, notify.PIRequest{Method: method, Path: c.Path, Params: params, Header: header})
	if err != nil {
		return err
	}
	res, ok := decodeEnvelope(ans.Body)
	if !ok {
		log.Warn().Int("status", ans.Status).Msg("federation: the answer is not a privacyIDEA response")
		return apierr.New(apierr.ConfigAdmin, fmt.Sprintf(
			"The privacyIDEA server %s did not answer with a privacyIDEA response (HTTP status %d).", id, ans.Status)).Wrap(notify.ErrPIFailed)
	}
	if res.Detail == nil {
		res.Detail = map[string]any{}
	}
	res.Detail["origin"] = ans.URL
	c.Response.Status, c.Response.Value, c.Response.Error, c.Response.Detail = res.Status, res.Value, res.Error, res.Detail
	c.Response.Changed = true
	return nil
}

// forwardParams encodes the request's parameters as a form: strings as
// they are, booleans as True/False, numbers in decimal, lists as repeated
// keys and objects as JSON text; null is left out.
func forwardParams(p map[string]any) url.Values {
	out := url.Values{}
	for k, v := range p {
		switch x := v.(type) {
		case nil:
		case []any:
			for _, e := range x {
				if e != nil {
					out.Add(k, forwardValue(e))
				}
			}
		case []string:
			for _, e := range x {
				out.Add(k, e)
			}
		default:
			out.Add(k, forwardValue(x))
		}
	}
	return out
}

func forwardValue(v any) string {
	switch x := v.(type) {
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return ""
		}
		return string(b)
	case json.Number:
		return x.String()
	}
	return toString(v)
}

// authorizationToken is the caller's token as privacyIDEA reads it:
// PI-Authorization, else Authorization (header names in any case).
func authorizationToken(h map[string][]string) string {
	get := func(name string) string {
		for k, vs := range h {
			if strings.EqualFold(k, name) && len(vs) > 0 {
				return vs[0]
			}
		}
		return ""
	}
	if v := get("PI-Authorization"); v != "" {
		return v
	}
	return get("Authorization")
}

// decodeEnvelope reads a privacyIDEA JSON answer: its result (status,
// value, error) and detail. ok is false when body is not one.
func decodeEnvelope(body []byte) (*Response, bool) {
	var env struct {
		Result *struct {
			Status bool `json:"status"`
			Value  any  `json:"value"`
			Error  *struct {
				Code    any    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"result"`
		Detail map[string]any `json:"detail"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Result == nil {
		return nil, false
	}
	res := &Response{Status: env.Result.Status, Value: env.Result.Value, Detail: env.Detail}
	if e := env.Result.Error; e != nil {
		res.Error = &ResponseError{Code: errorCode(e.Code), Message: e.Message}
	}
	return res, true
}

// errorCode reads an error code written as a number or a numeric string.
func errorCode(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(strings.TrimSpace(x))
		return n
	}
	return 0
}
