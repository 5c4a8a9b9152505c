package eventing

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/user"
)

func reqDef(action string, opts map[string]string) Definition {
	return Definition{Name: "mangle", Active: true, Position: Pre, HandlerModule: "RequestMangler", Action: action,
		Events: []string{"validate_check"}, Options: opts}
}

func TestRequestMangler(t *testing.T) {
	s := scriptTestService(t, "")
	m := newRequestMangler(s)
	base := func() map[string]any {
		return map[string]any{"user": "alice@example.com", "realm": "old", "pass": "x", "n": 5}
	}
	tests := []struct {
		name   string
		action string
		opts   map[string]string
		params map[string]any
		want   map[string]any
	}{
		{"delete", "delete", map[string]string{"parameter": "realm"}, base(),
			map[string]any{"user": "alice@example.com", "pass": "x", "n": 5}},
		{"delete missing", "delete", map[string]string{"parameter": "nothing"}, base(), base()},
		{"delete with nil params", "delete", map[string]string{"parameter": "realm"}, nil, nil},
		{"set", "set", map[string]string{"parameter": "realm", "value": "new"}, base(),
			map[string]any{"user": "alice@example.com", "realm": "new", "pass": "x", "n": 5}},
		{"set is case-insensitive and keeps braces without match", "SET", map[string]string{"parameter": "x", "value": "{0}"}, base(),
			map[string]any{"user": "alice@example.com", "realm": "old", "pass": "x", "n": 5, "x": "{0}"}},
		{"set empty value", "set", map[string]string{"parameter": "realm", "value": ""}, base(),
			map[string]any{"user": "alice@example.com", "realm": "", "pass": "x", "n": 5}},
		{"set creates the params", "set", map[string]string{"parameter": "realm", "value": "r"}, nil,
			map[string]any{"realm": "r"}},
		{"set user from groups", "set", map[string]string{"parameter": "user", "value": "{0}",
			"match_parameter": "user", "match_pattern": "(.*)@(.*)"}, base(),
			map[string]any{"user": "alice", "realm": "old", "pass": "x", "n": 5}},
		{"set realm from second group", "set", map[string]string{"parameter": "realm", "value": "{1}-{{x}}",
			"match_parameter": "user", "match_pattern": "(.*)@(.*)"}, base(),
			map[string]any{"user": "alice@example.com", "realm": "example.com-{x}", "pass": "x", "n": 5}},
		{"groups in any order", "set", map[string]string{"parameter": "user", "value": "{1}\\{0}",
			"match_parameter": "user", "match_pattern": `([^@]+)@([a-z]+)\..*`}, base(),
			map[string]any{"user": "example\\alice", "realm": "old", "pass": "x", "n": 5}},
		{"pattern must match the whole value", "set", map[string]string{"parameter": "realm", "value": "hit",
			"match_parameter": "user", "match_pattern": "alice"}, base(), base()},
		{"no match sets nothing", "set", map[string]string{"parameter": "realm", "value": "{0}",
			"match_parameter": "user", "match_pattern": "(.*)@nowhere"}, base(), base()},
		{"missing match parameter sets nothing", "set", map[string]string{"parameter": "realm", "value": "x",
			"match_parameter": "serial", "match_pattern": ".*"}, base(), base()},
		{"non-string match parameter", "set", map[string]string{"parameter": "m", "value": "n={0}",
			"match_parameter": "n", "match_pattern": `(\d+)`}, base(),
			map[string]any{"user": "alice@example.com", "realm": "old", "pass": "x", "n": 5, "m": "n=5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := reqDef(tc.action, tc.opts)
			if err := m.Check(t.Context(), d); err != nil {
				t.Fatalf("Check = %v", err)
			}
			c := &Call{Event: "validate_check", Params: tc.params}
			if err := m.Do(t.Context(), scriptTestRun(s, d, c, Pre)); err != nil {
				t.Fatalf("Do = %v", err)
			}
			if !reflect.DeepEqual(c.Params, tc.want) {
				t.Errorf("params %v, want %v", c.Params, tc.want)
			}
		})
	}
}

func TestRequestManglerResetUser(t *testing.T) {
	s := scriptTestService(t, "")
	m := newRequestMangler(s)
	old := user.User{Login: "alice@example.com", Realm: "old", Resolver: "res", UID: "1"}
	for _, tc := range []struct {
		name string
		opts map[string]string
		want user.User
	}{
		{"kept", map[string]string{"parameter": "realm", "value": "{1}", "match_parameter": "user", "match_pattern": "(.*)@(.*)"}, old},
		{"reset", map[string]string{"parameter": "realm", "value": "{1}", "match_parameter": "user", "match_pattern": "(.*)@(.*)",
			"reset_user": "1"}, user.User{Login: "alice@example.com", Realm: "example.com"}},
		{"privacyIDEA's option name", map[string]string{"parameter": "user", "value": "bob", "reset_username": "True"},
			user.User{Login: "bob", Realm: "old"}},
		{"other parameter", map[string]string{"parameter": "serial", "value": "S", "reset_user": "1"}, old},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Call{Params: map[string]any{"user": "alice@example.com", "realm": "old"}, User: old}
			r := scriptTestRun(s, reqDef("set", tc.opts), c, Pre)
			if got := r.User(t.Context()); got != old {
				t.Fatalf("User before = %v", got)
			}
			if err := m.Do(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			if c.User != tc.want {
				t.Errorf("call user %+v, want %+v", c.User, tc.want)
			}
			// The following handlers (sharing the call's facts) see it.
			if got := r.User(t.Context()); got != tc.want {
				t.Errorf("Run.User after = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRequestManglerCheck(t *testing.T) {
	m := newRequestMangler(scriptTestService(t, ""))
	for _, tc := range []struct {
		name   string
		action string
		opts   map[string]string
	}{
		{"unknown action", "rename", map[string]string{"parameter": "a"}},
		{"delete without parameter", "delete", nil},
		{"set without parameter", "set", map[string]string{"value": "x"}},
		{"match without pattern", "set", map[string]string{"parameter": "a", "value": "x", "match_parameter": "b"}},
		{"bad pattern", "set", map[string]string{"parameter": "a", "value": "x", "match_parameter": "b", "match_pattern": "(x"}},
		{"group out of range", "set", map[string]string{"parameter": "a", "value": "{0}{2}", "match_parameter": "b", "match_pattern": "(x)(y)"}},
		{"group without groups", "set", map[string]string{"parameter": "a", "value": "{0}", "match_parameter": "b", "match_pattern": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Check(t.Context(), reqDef(tc.action, tc.opts))
			if !apierr.Is(err, apierr.Parameter) {
				t.Errorf("Check = %v, want a parameter error", err)
			}
		})
	}
	if m.Name() != "RequestMangler" || !slices.Equal(m.Positions(), []string{"post", "pre"}) || m.DefaultAbort() {
		t.Errorf("module %s %v %v", m.Name(), m.Positions(), m.DefaultAbort())
	}
	acts, _ := m.Actions(t.Context())
	if !acts["delete"]["parameter"].Required || !acts["set"]["value"].Required || acts["set"]["reset_user"].Type != "bool" {
		t.Errorf("actions %+v", acts)
	}
}

func TestFormatGroups(t *testing.T) {
	groups := []string{"a", "b", ""}
	for _, tc := range []struct{ in, want string }{
		{"{0}{1}", "ab"},
		{"x{2}y", "xy"},
		{"{{0}}", "{0}"},
		{"{name}", "{name}"},
		{"{}", "{}"},
		{"{-1}", "{-1}"},
		{"{+1}", "{+1}"},
		{"unclosed {0", "unclosed {0"},
		{"}", "}"},
		{"{1}}}", "b}"},
	} {
		got, err := formatGroups(tc.in, groups)
		if err != nil || got != tc.want {
			t.Errorf("formatGroups(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := formatGroups("{3}", groups); err == nil {
		t.Error("a group out of range was accepted")
	}
}

func respDef(action, ptr string, more ...string) Definition {
	opts := map[string]string{"JSON pointer": ptr}
	for i := 0; i+1 < len(more); i += 2 {
		opts[more[i]] = more[i+1]
	}
	return Definition{Name: "mangle response", Active: true, Position: Post, HandlerModule: "ResponseMangler",
		Action: action, Events: []string{"validate_check"}, Options: opts}
}

// mangledEnvelope is the response as JSON, for comparing.
func mangledEnvelope(t *testing.T, r *Response) string {
	t.Helper()
	v := map[string]any{"result": map[string]any{"status": r.Status, "value": r.Value}, "detail": r.Detail}
	if r.Error != nil {
		v["result"].(map[string]any)["error"] = r.Error
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResponseMangler(t *testing.T) {
	s := scriptTestService(t, "")
	m := newResponseMangler(s)
	ok := func() *Response {
		return &Response{Status: true, Value: false, Detail: map[string]any{
			"message": "wrong otp value", "serial": "HOTP1", "messages": []string{"a", "b"},
			"multi_challenge": []map[string]any{{"serial": "X", "type": "hotp"}}}}
	}
	tests := []struct {
		name string
		def  Definition
		in   *Response
		want string // the envelope; "" when it stays as it was
	}{
		{"delete /detail/message", respDef("delete", "/detail/message"), ok(),
			`{"detail":{"messages":["a","b"],"multi_challenge":[{"serial":"X","type":"hotp"}],"serial":"HOTP1"},"result":{"status":true,"value":false}}`},
		{"set /result/value bool", respDef("set", "/result/value", "type", "bool", "value", "True"), ok(),
			`{"detail":{"message":"wrong otp value","messages":["a","b"],"multi_challenge":[{"serial":"X","type":"hotp"}],"serial":"HOTP1"},"result":{"status":true,"value":true}}`},
		{"set /detail/x integer", respDef("set", "/detail/x", "type", "integer", "value", " 42"),
			&Response{Status: true, Value: true, Detail: map[string]any{"message": "m"}},
			`{"detail":{"message":"m","x":42},"result":{"status":true,"value":true}}`},
		{"set string is the default type", respDef("set", "/detail/message", "value", "hello"),
			&Response{Status: true, Value: true, Detail: map[string]any{"message": "m"}},
			`{"detail":{"message":"hello"},"result":{"status":true,"value":true}}`},
		{"privacyIDEA's add", respDef("add", "/detail/message", "type", "string", "value", "hello"),
			&Response{Status: true, Value: true, Detail: map[string]any{"message": "m"}},
			`{"detail":{"message":"hello"},"result":{"status":true,"value":true}}`},
		{"set creates intermediate objects", respDef("set", "/detail/a/b/c", "type", "bool", "value", "0"),
			&Response{Status: true, Value: true},
			`{"detail":{"a":{"b":{"c":false}}},"result":{"status":true,"value":true}}`},
		{"escaped names", respDef("set", "/detail/a~1b~0c", "value", "v"),
			&Response{Status: true, Value: true, Detail: map[string]any{}},
			`{"detail":{"a/b~c":"v"},"result":{"status":true,"value":true}}`},
		{"delete an element of a typed array", respDef("delete", "/detail/messages/0"), ok(),
			`{"detail":{"message":"wrong otp value","messages":["b"],"multi_challenge":[{"serial":"X","type":"hotp"}],"serial":"HOTP1"},"result":{"status":true,"value":false}}`},
		{"delete inside a typed array of objects", respDef("delete", "/detail/multi_challenge/0/serial"), ok(),
			`{"detail":{"message":"wrong otp value","messages":["a","b"],"multi_challenge":[{"type":"hotp"}],"serial":"HOTP1"},"result":{"status":true,"value":false}}`},
		{"append to an array", respDef("set", "/detail/messages/-", "value", "c"), ok(),
			`{"detail":{"message":"wrong otp value","messages":["a","b","c"],"multi_challenge":[{"serial":"X","type":"hotp"}],"serial":"HOTP1"},"result":{"status":true,"value":false}}`},
		{"set /result/status", respDef("set", "/result/status", "type", "string", "value", "false"),
			&Response{Status: true, Value: true},
			`{"detail":null,"result":{"status":false,"value":true}}`},
		{"set the error message", respDef("set", "/result/error/message", "value", "ERR905: nope"),
			&Response{Status: false, Error: &ResponseError{Code: 905, Message: "ERR905: Missing parameter: user"}},
			`{"detail":null,"result":{"error":{"code":905,"message":"ERR905: nope"},"status":false,"value":null}}`},
		{"set the error code", respDef("set", "/result/error/code", "type", "integer", "value", "601"),
			&Response{Status: false, Error: &ResponseError{Code: 905, Message: "m"}},
			`{"detail":null,"result":{"error":{"code":601,"message":"m"},"status":false,"value":null}}`},
		{"delete the error", respDef("delete", "/result/error"),
			&Response{Status: false, Error: &ResponseError{Code: 905, Message: "m"}},
			`{"detail":null,"result":{"status":false,"value":null}}`},
		{"delete inside the value", respDef("delete", "/result/value/secret"),
			&Response{Status: true, Value: map[string]any{"secret": "s", "kept": 1}},
			`{"detail":null,"result":{"status":true,"value":{"kept":1}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.Check(t.Context(), tc.def); err != nil {
				t.Fatalf("Check = %v", err)
			}
			c := &Call{Event: "validate_check", Response: tc.in}
			if err := m.Do(t.Context(), scriptTestRun(s, tc.def, c, Post)); err != nil {
				t.Fatalf("Do = %v", err)
			}
			if !c.Response.Changed {
				t.Error("Changed is not set")
			}
			if got := mangledEnvelope(t, c.Response); got != tc.want {
				t.Errorf("envelope\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestResponseManglerFailures(t *testing.T) {
	s := scriptTestService(t, "")
	m := newResponseMangler(s)
	for _, tc := range []struct {
		name string
		def  Definition
	}{
		{"delete missing member", respDef("delete", "/detail/nothing")},
		{"delete below a missing member", respDef("delete", "/detail/nothing/deeper")},
		{"delete below a string", respDef("delete", "/detail/message/x")},
		{"delete a missing index", respDef("delete", "/detail/list/2")},
		{"delete a bad index", respDef("delete", "/detail/list/01")},
		{"set through a string", respDef("set", "/detail/message/x", "value", "v")},
		{"set a missing index", respDef("set", "/detail/list/5", "value", "v")},
		{"delete a missing error", respDef("delete", "/result/error/message")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.Check(t.Context(), tc.def); err != nil {
				t.Fatalf("Check = %v", err)
			}
			res := &Response{Status: true, Value: true, Detail: map[string]any{"message": "m", "list": []any{"a", "b"}}}
			before := maps.Clone(res.Detail)
			err := m.Do(t.Context(), scriptTestRun(s, tc.def, &Call{Response: res}, Post))
			if !apierr.Is(err, apierr.Parameter) || !strings.Contains(err.Error(), tc.def.Options["JSON pointer"]) {
				t.Fatalf("Do = %v, want a parameter error naming the pointer", err)
			}
			if res.Changed || !reflect.DeepEqual(res.Detail, before) {
				t.Errorf("a failed change changed the response: %+v", res)
			}
		})
	}

	// Through Service.Run the failure is audited and the operation goes on.
	if _, err := s.Set(t.Context(), respDef("delete", "/detail/nothing"), false); err != nil {
		t.Fatal(err)
	}
	res := &Response{Status: true, Value: true, Detail: map[string]any{"message": "m"}}
	if err := s.Run(t.Context(), Post, &Call{Event: "validate_check", Response: res}); err != nil {
		t.Fatalf("Run = %v; a failed mangler must not stop the operation", err)
	}
	if res.Changed || res.Detail["message"] != "m" {
		t.Errorf("response %+v", res)
	}

	// No response (a pre handler): nothing to do.
	if err := m.Do(t.Context(), scriptTestRun(s, respDef("delete", "/detail/message"), &Call{}, Pre)); err != nil {
		t.Errorf("Do without response = %v", err)
	}
}

func TestResponseManglerCheck(t *testing.T) {
	m := newResponseMangler(scriptTestService(t, ""))
	for _, tc := range []struct {
		name string
		def  Definition
	}{
		{"unknown action", respDef("replace", "/detail/message")},
		{"no pointer", respDef("delete", "")},
		{"no leading slash", respDef("delete", "detail/message")},
		{"root", respDef("delete", "/")},
		{"whole detail", respDef("delete", "/detail")},
		{"whole result", respDef("set", "/result", "value", "x")},
		{"envelope member", respDef("delete", "/version")},
		{"unknown result member", respDef("set", "/result/authentication", "value", "ACCEPT")},
		{"below status", respDef("set", "/result/status/x", "value", "1")},
		{"set the whole error", respDef("set", "/result/error", "value", "x")},
		{"other error member", respDef("delete", "/result/error/detail")},
		{"bad escape", respDef("delete", "/detail/a~2")},
		{"trailing tilde", respDef("delete", "/detail/a~")},
		{"bad integer", respDef("set", "/detail/x", "type", "integer", "value", "4x")},
		{"unknown type", respDef("set", "/detail/x", "type", "float", "value", "1.5")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Check(t.Context(), tc.def)
			if !apierr.Is(err, apierr.Parameter) {
				t.Errorf("Check = %v, want a parameter error", err)
			}
		})
	}
	// Stored definitions are checked.
	s := scriptTestService(t, "")
	if _, err := s.Set(t.Context(), respDef("delete", "detail/message"), false); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("Set = %v", err)
	}
	if m.Name() != "ResponseMangler" || !slices.Equal(m.Positions(), []string{"post"}) || m.DefaultAbort() {
		t.Errorf("module %s %v %v", m.Name(), m.Positions(), m.DefaultAbort())
	}
	acts, _ := m.Actions(t.Context())
	if !slices.Equal(acts["set"]["type"].Value, []string{"string", "integer", "bool"}) || !acts["delete"]["JSON pointer"].Required {
		t.Errorf("actions %+v", acts)
	}
}
