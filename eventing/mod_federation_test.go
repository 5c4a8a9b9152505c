package eventing

import (
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
)

const fedRemoteCheck = `{"id":1,"jsonrpc":"2.0","result":{"status":true,"value":true,"authentication":"ACCEPT"},` +
	`"detail":{"message":"matching 1 tokens","serial":"REMOTE0001","type":"totp","threadid":77},"version":"privacyIDEA 3.11"}`

// fedCheckCall is a post call of /validate/check for alice in "local"
// from 192.0.2.7, answered locally with a reject.
func fedCheckCall() *Call {
	return &Call{
		Event: "validate_check", Method: "POST", Path: "/validate/check",
		Caller: caller.Caller{Role: caller.Anonymous, Client: netip.MustParseAddr("192.0.2.7"), RequestID: "req-fed",
			Headers: map[string][]string{"Authorization": {"jwt-of-caller"}, "Cookie": {"session=abc"}, "X-Other": {"x"}}},
		Params: map[string]any{"user": "alice", "realm": "local", "pass": "fed-Secret-991", "serial": nil,
			"flag": true, "count": json.Number("3"), "list": []any{"a", "b"}},
		Response: &Response{Status: true, Value: false, Detail: map[string]any{"message": "wrong otp pin"}},
	}
}

func TestFederationForwardValidateCheck(t *testing.T) {
	e := newFedEnv(t)
	remote := newFedRemote(t, 200, fedRemoteCheck)
	if err := e.notify.SetPIServer(t.Context(), notify.PIServer{Identifier: "child", URL: remote.srv.URL + "/"}); err != nil {
		t.Fatal(err)
	}
	id := e.define(t, "validate_check", map[string]string{"privacyIDEA": "child", "realm": "remoterealm",
		"forward_client_ip": "True", "forward_authorization_token": "1"})
	if d, err := e.svc.Get(t.Context(), id); err != nil || !d.AbortOnError {
		t.Fatalf("abort_on_error default: %+v, %v", d, err)
	}

	c := fedCheckCall()
	if err := e.svc.Run(t.Context(), Post, c); err != nil {
		t.Fatal(err)
	}
	hits := remote.got()
	if len(hits) != 1 {
		t.Fatalf("remote got %d requests", len(hits))
	}
	h := hits[0]
	if h.method != "POST" || h.path != "/validate/check" || h.contentType != "application/x-www-form-urlencoded" || len(h.query) != 0 {
		t.Errorf("request %s %s (%s) query %v", h.method, h.path, h.contentType, h.query)
	}
	wantForm := map[string][]string{"user": {"alice"}, "realm": {"remoterealm"}, "pass": {"fed-Secret-991"},
		"client": {"192.0.2.7"}, "flag": {"True"}, "count": {"3"}, "list": {"a", "b"}}
	if len(h.form) != len(wantForm) {
		t.Errorf("form %v, want %v", h.form, wantForm)
	}
	for k, want := range wantForm {
		if !slices.Equal(h.form[k], want) {
			t.Errorf("form %s = %q, want %q", k, h.form[k], want)
		}
	}
	if got := h.header.Get("Authorization"); got != "jwt-of-caller" {
		t.Errorf("Authorization %q", got)
	}
	if h.header.Get("Cookie") != "" || h.header.Get("X-Other") != "" {
		t.Errorf("other headers forwarded: %v", h.header)
	}

	res := c.Response
	if !res.Changed || !res.Status || res.Value != true || res.Error != nil {
		t.Errorf("response %+v", res)
	}
	if res.Detail["message"] != "matching 1 tokens" || res.Detail["serial"] != "REMOTE0001" ||
		res.Detail["origin"] != remote.srv.URL+"/validate/check" {
		t.Errorf("detail %v", res.Detail)
	}
	// The handler's run is audited as a success.
	rows := e.auditRows(t, "*Federation:forward*")
	if len(rows) != 1 || !succeeded(rows[0]) {
		t.Errorf("audit %v", rows)
	}
	if strings.Contains(e.log.String(), "fed-Secret-991") || strings.Contains(e.log.String(), "jwt-of-caller") {
		t.Errorf("a secret is in the log: %s", e.log.String())
	}
}

func TestFederationForwardGetWithoutOptions(t *testing.T) {
	e := newFedEnv(t)
	remote := newFedRemote(t, 200, `{"result":{"status":true,"value":{"count":1,"tokens":[{"serial":"R1"}]}},"detail":null}`)
	if err := e.notify.SetPIServer(t.Context(), notify.PIServer{Identifier: "child", URL: remote.srv.URL + "/pi"}); err != nil {
		t.Fatal(err)
	}
	e.define(t, "token_list", map[string]string{"privacyIDEA": "child", "forward_client_ip": "False"})
	c := fedCheckCall()
	c.Event, c.Method, c.Path = "token_list", "GET", "/token/"
	c.Params = map[string]any{"user": "alice", "realm": "local"}
	if err := e.svc.Run(t.Context(), Post, c); err != nil {
		t.Fatal(err)
	}
	h := remote.got()[0]
	if h.method != "GET" || h.path != "/pi/token/" || len(h.form) != 0 {
		t.Errorf("request %s %s form %v", h.method, h.path, h.form)
	}
	if h.query.Get("user") != "alice" || h.query.Get("realm") != "local" || h.query.Has("client") {
		t.Errorf("query %v", h.query)
	}
	if h.header.Get("Authorization") != "" {
		t.Error("the token was forwarded without forward_authorization_token")
	}
	v, _ := c.Response.Value.(map[string]any)
	if v["count"] != float64(1) || c.Response.Detail["origin"] != remote.srv.URL+"/pi/token/" || len(c.Response.Detail) != 1 {
		t.Errorf("response %+v", c.Response)
	}
}

func TestFederationRemoteError(t *testing.T) {
	e := newFedEnv(t)
	remote := newFedRemote(t, 400, `{"result":{"status":false,"error":{"code":904,"message":"ERR904: The user can not be found in any resolver in this realm!"}},"detail":null}`)
	if err := e.notify.SetPIServer(t.Context(), notify.PIServer{Identifier: "child", URL: remote.srv.URL}); err != nil {
		t.Fatal(err)
	}
	e.define(t, "token_delete", map[string]string{"privacyIDEA": "child", "resolver": "remote-res"})
	c := fedCheckCall()
	c.Event, c.Method, c.Path = "token_delete", "DELETE", "/token/S1"
	c.Params = map[string]any{"serial": "S1", "resolver": "local-res"}
	if err := e.svc.Run(t.Context(), Post, c); err != nil {
		t.Fatal(err)
	}
	h := remote.got()[0]
	if h.method != "DELETE" || h.path != "/token/S1" || h.form.Get("resolver") != "remote-res" || h.form.Get("serial") != "S1" {
		t.Errorf("request %s %s form %v", h.method, h.path, h.form)
	}
	res := c.Response
	if !res.Changed || res.Status || res.Error == nil || res.Error.Code != 904 ||
		res.Error.Message != "ERR904: The user can not be found in any resolver in this realm!" || res.Value != nil {
		t.Errorf("response %+v (error %+v)", res, res.Error)
	}
	if res.Detail["origin"] != remote.srv.URL+"/token/S1" {
		t.Errorf("detail %v", res.Detail)
	}
}

func TestFederationFailures(t *testing.T) {
	e := newFedEnv(t)
	remote := newFedRemote(t, 502, "<html>bad gateway internal-remote-text</html>")
	if err := e.notify.SetPIServer(t.Context(), notify.PIServer{Identifier: "child", URL: remote.srv.URL}); err != nil {
		t.Fatal(err)
	}
	e.define(t, "validate_check", map[string]string{"privacyIDEA": "child"})

	t.Run("NotJSON", func(t *testing.T) {
		c := fedCheckCall()
		err := e.svc.Run(t.Context(), Post, c)
		if !apierr.Is(err, apierr.ConfigAdmin) || !errors.Is(err, notify.ErrPIFailed) {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(err.Error(), "internal-remote-text") {
			t.Errorf("the error shows the remote answer: %v", err)
		}
		if c.Response.Changed || c.Response.Value != false {
			t.Errorf("response changed: %+v", c.Response)
		}
	})

	t.Run("JSONWithoutResult", func(t *testing.T) {
		remote.answer(200, `{"hello":"world"}`)
		c := fedCheckCall()
		if err := e.svc.Run(t.Context(), Post, c); !errors.Is(err, notify.ErrPIFailed) || c.Response.Changed {
			t.Fatalf("err = %v, response %+v", err, c.Response)
		}
	})

	t.Run("Unreachable", func(t *testing.T) {
		remote.srv.Close()
		c := fedCheckCall()
		err := e.svc.Run(t.Context(), Post, c)
		if !errors.Is(err, notify.ErrPIFailed) || c.Response.Changed {
			t.Fatalf("err = %v, response %+v", err, c.Response)
		}
		rows := e.auditRows(t, "*Federation:forward*")
		if len(rows) == 0 || succeeded(rows[0]) {
			t.Errorf("failure not audited: %v", rows)
		}
	})

	t.Run("ServerDeleted", func(t *testing.T) {
		if err := e.notify.DeletePIServer(t.Context(), "child"); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Run(t.Context(), Post, fedCheckCall()); !errors.Is(err, notify.ErrPIServerNotFound) {
			t.Fatalf("err = %v", err)
		}
	})

	if strings.Contains(e.log.String(), "fed-Secret-991") {
		t.Error("the password is in the log")
	}
}

func TestFederationDoEdges(t *testing.T) {
	e := newFedEnv(t)
	remote := newFedRemote(t, 200, fedRemoteCheck)
	if err := e.notify.SetPIServer(t.Context(), notify.PIServer{Identifier: "child", URL: remote.srv.URL}); err != nil {
		t.Fatal(err)
	}
	m, _ := e.svc.Module("Federation")
	run := func(c *Call, pos string) *Run {
		return &Run{Def: Definition{Name: "f", HandlerModule: "Federation", Action: "forward",
			Options: map[string]string{"privacyIDEA": "child"}}, Call: c, Position: pos, svc: e.svc, facts: &facts{}}
	}

	// Another method: nothing is sent and the answer stays.
	c := fedCheckCall()
	c.Method = "PUT"
	if err := m.Do(t.Context(), run(c, Post)); err != nil || c.Response.Changed {
		t.Errorf("PUT: %v, %+v", err, c.Response)
	}
	// Before the operation there is no answer to replace.
	c = fedCheckCall()
	c.Response = nil
	if err := m.Do(t.Context(), run(c, Pre)); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("pre: %v", err)
	}
	// No path.
	c = fedCheckCall()
	c.Path = ""
	if err := m.Do(t.Context(), run(c, Post)); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("no path: %v", err)
	}
	// Without forward_client_ip and forward_authorization_token nothing of
	// the caller goes along.
	c = fedCheckCall()
	if err := m.Do(t.Context(), run(c, Post)); err != nil || !c.Response.Changed {
		t.Fatalf("forward: %v, %+v", err, c.Response)
	}
	// PI-Authorization wins over Authorization, as privacyIDEA reads it.
	c = fedCheckCall()
	c.Caller.Headers = map[string][]string{"authorization": {"plain"}, "Pi-Authorization": {"pi-token"}}
	r := run(c, Post)
	r.Def.Options["forward_authorization_token"] = "true"
	if err := m.Do(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	hits := remote.got()
	if len(hits) != 2 {
		t.Fatalf("remote got %d requests, want 2", len(hits))
	}
	if hits[0].form.Has("client") || hits[0].header.Get("Authorization") != "" || hits[0].form.Get("realm") != "local" {
		t.Errorf("first forward: form %v header %v", hits[0].form, hits[0].header)
	}
	if hits[1].header.Get("Authorization") != "pi-token" {
		t.Errorf("second forward header %v", hits[1].header)
	}
}

func TestFederationDefinition(t *testing.T) {
	e := newFedEnv(t)
	m, ok := e.svc.Module("Federation")
	if !ok || m.Name() != "Federation" || !m.DefaultAbort() || !slices.Equal(m.Positions(), []string{Post}) {
		t.Fatalf("module %v", m)
	}
	for _, id := range []string{"b-server", "a-server"} {
		if err := e.notify.SetPIServer(t.Context(), notify.PIServer{Identifier: id, URL: "https://pi.example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	acts, err := m.Actions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fw := acts["forward"]
	if len(acts) != 1 || !fw["privacyIDEA"].Required || !slices.Equal(fw["privacyIDEA"].Value, []string{"a-server", "b-server"}) {
		t.Errorf("actions %+v", acts)
	}
	for _, k := range []string{"realm", "resolver", "forward_client_ip", "forward_authorization_token"} {
		if _, ok := fw[k]; !ok {
			t.Errorf("option %s missing", k)
		}
	}
	if fw["forward_client_ip"].Type != "bool" || fw["forward_authorization_token"].Type != "bool" {
		t.Errorf("option types %+v", fw)
	}

	cases := []struct {
		name, action string
		opts         map[string]string
		ok           bool
	}{
		{"OK", "forward", map[string]string{"privacyIDEA": "a-server"}, true},
		{"UnknownAction", "send", map[string]string{"privacyIDEA": "a-server"}, false},
		{"NoServer", "forward", map[string]string{"realm": "r"}, false},
		{"UndefinedServer", "forward", map[string]string{"privacyIDEA": "nosuch"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.Set(t.Context(), Definition{Name: "d", Active: true, Events: []string{"validate_check"},
				HandlerModule: "Federation", Action: tc.action, Options: tc.opts}, false)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if err != nil && !apierr.Is(err, apierr.Parameter) {
				t.Errorf("err = %v, want a parameter error", err)
			}
		})
	}
}
