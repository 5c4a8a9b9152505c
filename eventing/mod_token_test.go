package eventing

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
)

func tokAdminCall(event, serial string) *Call {
	return &Call{Event: event, Serial: serial, Caller: caller.Caller{Role: caller.Admin, Name: "admin",
		Client: netip.MustParseAddr("127.0.0.1"), UserAgent: "privacyIDEA-LDAP-Proxy/1.2 (linux)", RequestID: "req-1"}}
}

func TestTokenModuleDescription(t *testing.T) {
	e := newTokEnv(t)
	m := newToken(e.svc)
	if m.Name() != "Token" || m.DefaultAbort() || !slices.Equal(m.Positions(), []string{"post", "pre"}) {
		t.Fatalf("Name %q DefaultAbort %v Positions %v", m.Name(), m.DefaultAbort(), m.Positions())
	}
	acts, err := m.Actions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"attach application", "change failcounter", "delete", "delete tokeninfo", "disable", "enable", "enroll",
		"increase tokeninfo", "set countwindow", "set description", "set failcounter", "set max failcount",
		"set random pin", "set tokeninfo", "set tokenrealm", "set validity", "unassign"}
	var got []string
	for a := range acts {
		got = append(got, a)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	if o := acts["set tokenrealm"]["realm"]; !o.Required || !slices.Equal(o.Value, []string{"realm1", "realm2"}) {
		t.Errorf("set tokenrealm realm = %+v", o)
	}
	if o := acts["enroll"]["tokentype"]; !o.Required || !slices.Contains(o.Value, "hotp") {
		t.Errorf("enroll tokentype = %+v", o)
	}
	if o := acts["enroll"]["dynamic_phone"]; o.VisibleIf != "tokentype" || o.VisibleValue != "sms" || o.Type != "bool" {
		t.Errorf("enroll dynamic_phone = %+v", o)
	}
	if o := acts["set random pin"]["length"]; len(o.Value) != 31 || o.Value[0] != "1" || o.Value[30] != "31" {
		t.Errorf("set random pin length = %+v", o)
	}
	for _, k := range []string{"valid from", "valid till"} {
		if _, ok := acts["set validity"][k]; !ok {
			t.Errorf("set validity lacks %q", k)
		}
	}
	for a, opts := range acts {
		for k, o := range opts {
			if o.Type == "" || o.Description == "" {
				t.Errorf("%s/%s has no type or description: %+v", a, k, o)
			}
		}
	}
}

func TestTokenModuleCheck(t *testing.T) {
	e := newTokEnv(t)
	m := newToken(e.svc)
	tests := []struct {
		name   string
		action string
		opts   map[string]string
		bad    string // substring of the error; "" = accepted
	}{
		{"realm missing", "set tokenrealm", nil, "realm"},
		{"realm unknown", "set tokenrealm", map[string]string{"realm": "nowhere"}, "does not exist"},
		{"realm ok", "set tokenrealm", map[string]string{"realm": "Realm2", "only_realm": "1"}, ""},
		{"enroll type missing", "enroll", nil, "tokentype"},
		{"enroll type unknown", "enroll", map[string]string{"tokentype": "nosuch"}, "Unknown token type"},
		{"enroll bad params", "enroll", map[string]string{"tokentype": "hotp", "additional_params": "[1,2]"}, "JSON object"},
		{"enroll python dict", "enroll", map[string]string{"tokentype": "totp", "additional_params": "{'hashlib': 'sha256'}"}, ""},
		{"enroll bad realm", "enroll", map[string]string{"tokentype": "hotp", "realm": "nowhere"}, "does not exist"},
		{"validity bad", "set validity", map[string]string{"valid from": "tomorrow"}, "Could not parse"},
		{"validity offset", "set validity", map[string]string{"valid from": "+10m", "valid till": "2027-01-01T00:00+0000"}, ""},
		{"countwindow missing", "set countwindow", nil, "count window"},
		{"countwindow range", "set countwindow", map[string]string{"count window": "0"}, "count_window"},
		{"tokeninfo key missing", "set tokeninfo", map[string]string{"value": "x"}, "key"},
		{"tokeninfo protected", "set tokeninfo", map[string]string{"key": "count_auth", "value": "0"}, "cannot be changed"},
		{"increase bad increment", "increase tokeninfo", map[string]string{"key": "k", "increment": "x"}, "increment"},
		{"delete tokeninfo missing", "delete tokeninfo", nil, "key"},
		{"failcounter negative", "set failcounter", map[string]string{"fail counter": "-1"}, "fail counter"},
		{"failcounter ok", "set failcounter", map[string]string{"fail counter": "3"}, ""},
		{"change failcounter bad", "change failcounter", map[string]string{"change fail counter": "+x"}, "change fail counter"},
		{"change failcounter ok", "change failcounter", map[string]string{"change fail counter": "-2"}, ""},
		{"max failcount bad", "set max failcount", map[string]string{"max failcount": "many"}, "max_failcount"},
		{"pin length 0", "set random pin", map[string]string{"length": "0"}, "length"},
		{"pin length 32", "set random pin", map[string]string{"length": "32"}, "length"},
		{"pin length 31", "set random pin", map[string]string{"length": "31"}, ""},
		// privacyIDEA stores any action name (section 7.3).
		{"unknown action", "add tokengroup", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Check(t.Context(), Definition{HandlerModule: "Token", Action: tc.action, Options: tc.opts})
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("error %v, want one about %q", err, tc.bad)
			}
			if !apierr.Is(err, apierr.Parameter) {
				t.Errorf("error %v is not a parameter error", err)
			}
		})
	}
}

func TestTokenModuleStateActions(t *testing.T) {
	e := newTokEnv(t)
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)
	e.hotp(t, "HOTP2", &alice)

	// disable acts on the token the call names, not on the owner's others.
	e.mustDo(t, "Token", "disable", nil, tokAdminCall("validate_check", "HOTP1"))
	if e.get(t, "HOTP1").Active || !e.get(t, "HOTP2").Active {
		t.Fatalf("after disable: HOTP1 active %v, HOTP2 active %v", e.get(t, "HOTP1").Active, e.get(t, "HOTP2").Active)
	}
	e.mustDo(t, "Token", "enable", nil, tokAdminCall("token_init", "HOTP1"))
	if !e.get(t, "HOTP1").Active {
		t.Fatal("enable left the token disabled")
	}

	// The serial may come from the request parameters.
	c := tokAdminCall("token_info", "")
	c.Params = map[string]any{"serial": "HOTP2"}
	e.mustDo(t, "Token", "unassign", nil, c)
	if tok := e.get(t, "HOTP2"); tok.Owner != nil || !slices.Contains(tok.Realms, "realm1") {
		t.Fatalf("after unassign: owner %v realms %v", tok.Owner, tok.Realms)
	}

	e.mustDo(t, "Token", "delete", nil, tokAdminCall("token_info", "HOTP2"))
	if _, err := e.tokens.Get(t.Context(), "HOTP2"); !apierr.Is(err, apierr.ResourceNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestTokenModuleNoSingleToken(t *testing.T) {
	e := newTokEnv(t)
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)
	e.hotp(t, "HOTP2", &alice)

	// alice has two tokens: no single token, nothing happens.
	c := tokAdminCall("validate_check", "")
	c.User = alice
	e.mustDo(t, "Token", "disable", nil, c)
	if !e.get(t, "HOTP1").Active || !e.get(t, "HOTP2").Active {
		t.Fatal("a token was disabled although the call had no single token")
	}
	// An unknown serial: nothing either.
	e.mustDo(t, "Token", "disable", nil, tokAdminCall("validate_check", "NOSUCH"))

	// With one token left, the user's token is the call's token.
	if err := e.tokens.Delete(t.Context(), "HOTP2"); err != nil {
		t.Fatal(err)
	}
	c = tokAdminCall("validate_check", "")
	c.User = alice
	e.mustDo(t, "Token", "disable", nil, c)
	if e.get(t, "HOTP1").Active {
		t.Fatal("the user's only token was not disabled")
	}
}

func TestTokenModuleRealm(t *testing.T) {
	e := newTokEnv(t)
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)
	e.hotp(t, "FREE1", nil)

	e.mustDo(t, "Token", "set tokenrealm", map[string]string{"realm": "realm2"}, tokAdminCall("token_init", "HOTP1"))
	if got := e.get(t, "HOTP1").Realms; !slices.Equal(got, []string{"realm1", "realm2"}) {
		t.Fatalf("added realm: %v", got)
	}
	e.mustDo(t, "Token", "set tokenrealm", map[string]string{"realm": "realm2"}, tokAdminCall("token_init", "FREE1"))
	e.mustDo(t, "Token", "set tokenrealm", map[string]string{"realm": "realm1", "only_realm": "True"}, tokAdminCall("token_init", "FREE1"))
	if got := e.get(t, "FREE1").Realms; !slices.Equal(got, []string{"realm1"}) {
		t.Fatalf("only_realm: %v", got)
	}
	// The owner's realm stays with only_realm.
	e.mustDo(t, "Token", "set tokenrealm", map[string]string{"realm": "realm2", "only_realm": "1"}, tokAdminCall("token_init", "HOTP1"))
	if got := e.get(t, "HOTP1").Realms; !slices.Equal(got, []string{"realm1", "realm2"}) {
		t.Fatalf("only_realm on an owned token: %v", got)
	}
}

func TestTokenModuleEnroll(t *testing.T) {
	e := newTokEnv(t)
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)

	t.Run("sms for the token owner", func(t *testing.T) {
		e.host.calls = nil
		e.mustDo(t, "Token", "enroll", map[string]string{"tokentype": "SMS", "user": "1", "sms_identifier": "gw1"},
			tokAdminCall("token_init", "HOTP1"))
		got := e.host.enrollments()
		if len(got) != 1 {
			t.Fatalf("%d enrollments", len(got))
		}
		c := got[0]
		if c.typ != "sms" || c.owner == nil || c.owner.Login != "alice" || c.owner.UID != alice.UID {
			t.Fatalf("enrollment %+v owner %+v", c, c.owner)
		}
		if c.params["phone"] != "+49170111" || c.params["sms.identifier"] != "gw1" || c.params["genkey"] != "1" {
			t.Fatalf("params %v", c.params)
		}
	})
	t.Run("dynamic email for the request user", func(t *testing.T) {
		e.host.calls = nil
		c := tokAdminCall("validate_check", "")
		c.User = alice
		e.mustDo(t, "Token", "enroll", map[string]string{"tokentype": "email", "user": "true", "dynamic_email": "1",
			"smtp_identifier": "mail1", "realm": "realm2"}, c)
		got := e.host.enrollments()[0]
		if got.owner == nil || got.owner.Login != "alice" || got.params["dynamic_email"] != "1" ||
			got.params["email.identifier"] != "mail1" || got.params["realm"] != "realm2" {
			t.Fatalf("enrollment %+v", got)
		}
		if _, ok := got.params["email"]; ok {
			t.Errorf("dynamic email also sent the address: %v", got.params)
		}
	})
	t.Run("email address from the user store", func(t *testing.T) {
		e.host.calls = nil
		e.mustDo(t, "Token", "enroll", map[string]string{"tokentype": "email", "user": "1"}, tokAdminCall("token_init", "HOTP1"))
		if got := e.host.enrollments()[0]; got.params["email"] != "alice@example.org" {
			t.Fatalf("params %v", got.params)
		}
	})
	t.Run("no owner without user", func(t *testing.T) {
		e.host.calls = nil
		e.mustDo(t, "Token", "enroll", map[string]string{"tokentype": "totp",
			"additional_params": `{"hashlib": "sha256", "timeStep": 60, "type": "spass"}`}, tokAdminCall("token_init", "HOTP1"))
		got := e.host.enrollments()[0]
		if got.owner != nil || got.typ != "totp" {
			t.Fatalf("enrollment %+v", got)
		}
		if got.params["hashlib"] != "sha256" || got.params["timeStep"] != "60" {
			t.Fatalf("additional params %v", got.params)
		}
		if _, ok := got.params["type"]; ok {
			t.Errorf("additional_params overrode the type: %v", got.params)
		}
	})
	t.Run("motp pin and no single token needed", func(t *testing.T) {
		e.host.calls = nil
		e.mustDo(t, "Token", "enroll", map[string]string{"tokentype": "motp", "motppin": "1234"}, tokAdminCall("user_add", ""))
		if got := e.host.enrollments()[0]; got.params["motppin"] != "1234" || got.owner != nil {
			t.Fatalf("enrollment %+v", got)
		}
	})
	t.Run("host error", func(t *testing.T) {
		boom := errors.New("enroll refused")
		e.host.err = boom
		defer func() { e.host.err = nil }()
		err := e.do(t, "Token", "enroll", map[string]string{"tokentype": "hotp"}, tokAdminCall("token_init", ""))
		if !errors.Is(err, boom) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestTokenModuleDescriptionAndInfo(t *testing.T) {
	e := newTokEnv(t)
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)
	c := tokAdminCall("validate_check", "HOTP1")

	e.mustDo(t, "Token", "set description", map[string]string{"description": "used from {client_ip} by {ua_browser} at {now}"}, c)
	if got, want := e.get(t, "HOTP1").Description, "used from 127.0.0.1 by privacyIDEA-LDAP-Proxy at 2026-11-22 08:00:00.000000+0000"; got != want {
		t.Fatalf("description %q, want %q", got, want)
	}

	e.mustDo(t, "Token", "set tokeninfo", map[string]string{"key": "checked", "value": "{now}"}, c)
	e.mustDo(t, "Token", "set tokeninfo", map[string]string{"key": "expires", "value": "until {now}+5d for {username}@{realm}"}, c)
	e.mustDo(t, "Token", "set tokeninfo", map[string]string{"key": "empty"}, c)
	info := e.get(t, "HOTP1").Info
	if info["checked"] != "2026-11-22 08:00:00.000000+0000" {
		t.Errorf("checked = %q", info["checked"])
	}
	if info["expires"] != "until 2026-11-27 08:00:00.000000+0000 for alice@realm1" {
		t.Errorf("expires = %q", info["expires"])
	}
	if v, ok := info["empty"]; !ok || v != "" {
		t.Errorf("empty = %q %v", v, ok)
	}

	e.mustDo(t, "Token", "delete tokeninfo", map[string]string{"key": "checked"}, c)
	if _, ok := e.get(t, "HOTP1").Info["checked"]; ok {
		t.Error("delete tokeninfo left the key")
	}

	// increase tokeninfo: a missing value counts as 0, default increment 1.
	e.mustDo(t, "Token", "increase tokeninfo", map[string]string{"key": "seen"}, c)
	e.mustDo(t, "Token", "increase tokeninfo", map[string]string{"key": "seen", "increment": "5"}, c)
	e.mustDo(t, "Token", "increase tokeninfo", map[string]string{"key": "seen", "increment": "-2"}, c)
	if got := e.get(t, "HOTP1").Info["seen"]; got != "4" {
		t.Fatalf("seen = %q, want 4", got)
	}
	err := e.do(t, "Token", "increase tokeninfo", map[string]string{"key": "expires"}, c)
	if err == nil || !apierr.Is(err, apierr.Parameter) {
		t.Fatalf("increasing a text value: %v", err)
	}
	if got := e.get(t, "HOTP1").Info["expires"]; !strings.HasPrefix(got, "until ") {
		t.Errorf("the failed increase changed the value: %q", got)
	}
}

func TestTokenModuleFields(t *testing.T) {
	e := newTokEnv(t)
	e.hotp(t, "HOTP1", nil)
	c := tokAdminCall("token_init", "HOTP1")

	e.mustDo(t, "Token", "set validity", map[string]string{"valid from": "2026-11-01T00:00+0000", "valid till": "+7d"}, c)
	tok := e.get(t, "HOTP1")
	if tok.Info[token.InfoValidityStart] != "2026-11-01T00:00+0000" || tok.Info[token.InfoValidityEnd] != "2026-11-29T08:00+0000" {
		t.Fatalf("validity %q .. %q", tok.Info[token.InfoValidityStart], tok.Info[token.InfoValidityEnd])
	}
	if !tok.InValidity(tokStart) || tok.InValidity(tokStart.Add(8*24*time.Hour)) {
		t.Error("the validity period does not bound the token")
	}
	// The legacy format /token/set accepts.
	e.mustDo(t, "Token", "set validity", map[string]string{"valid till": "31/12/26 23:59"}, c)
	if got := e.get(t, "HOTP1").Info[token.InfoValidityEnd]; got != "2026-12-31T23:59+0000" {
		t.Fatalf("legacy validity end %q", got)
	}

	e.mustDo(t, "Token", "set countwindow", map[string]string{"count window": "42"}, c)
	if got := e.get(t, "HOTP1").CountWindow; got != 42 {
		t.Fatalf("count window %d", got)
	}
	e.mustDo(t, "Token", "set max failcount", map[string]string{"max failcount": "5"}, c)
	if got := e.get(t, "HOTP1").MaxFail; got != 5 {
		t.Fatalf("max failcount %d", got)
	}

	e.mustDo(t, "Token", "set failcounter", map[string]string{"fail counter": "3"}, c)
	if got := e.get(t, "HOTP1").FailCount; got != 3 {
		t.Fatalf("fail counter %d", got)
	}
	e.mustDo(t, "Token", "change failcounter", map[string]string{"change fail counter": "+2"}, c)
	tok = e.get(t, "HOTP1")
	if tok.FailCount != 5 || tok.Info[token.InfoFailcounterExceed] != "2026-11-22T08:00+0000" {
		t.Fatalf("after +2: fail counter %d, exceeded %q", tok.FailCount, tok.Info[token.InfoFailcounterExceed])
	}
	e.mustDo(t, "Token", "change failcounter", map[string]string{"change fail counter": "-10"}, c)
	tok = e.get(t, "HOTP1")
	if tok.FailCount != 0 {
		t.Fatalf("after -10: fail counter %d, want the floor 0", tok.FailCount)
	}
	if _, ok := tok.Info[token.InfoFailcounterExceed]; ok {
		t.Error("failcounter_exceeded stayed below the maximum")
	}
}

func TestTokenModuleRandomPIN(t *testing.T) {
	e := newTokEnv(t)
	e.hotp(t, "HOTP1", nil)

	c := tokAdminCall("token_init", "HOTP1")
	c.Response = &Response{Status: true, Value: true, Detail: map[string]any{"serial": "HOTP1"}}
	e.mustDo(t, "Token", "set random pin", map[string]string{"length": "8"}, c)
	pin := c.PIN
	if len(pin) != 8 {
		t.Fatalf("call pin %q", pin)
	}
	// The PIN is for the later handlers only, never in the answer.
	if _, ok := c.Response.Detail["pin"]; ok || c.Response.Changed {
		t.Fatalf("the PIN reached the response: %v", c.Response)
	}
	ok, err := e.tokens.CheckPIN(t.Context(), e.get(t, "HOTP1"), pin)
	if err != nil || !ok {
		t.Fatalf("the PIN of the call is not the token PIN: %v %v", ok, err)
	}

	// The default length is 12.
	pre := tokAdminCall("token_init", "HOTP1")
	e.mustDo(t, "Token", "set random pin", nil, pre)
	if len(pre.PIN) != 12 {
		t.Fatalf("default length PIN %q", pre.PIN)
	}
	if ok, _ := e.tokens.CheckPIN(t.Context(), e.get(t, "HOTP1"), pin); ok {
		t.Fatal("the second random PIN equals the first")
	}
}

func TestTokenModuleLockedToken(t *testing.T) {
	e := newTokEnv(t)
	e.hotp(t, "HOTP1", nil)
	if err := e.tokens.Revoke(t.Context(), "HOTP1"); err != nil {
		t.Fatal(err)
	}
	err := e.do(t, "Token", "enable", nil, tokAdminCall("token_init", "HOTP1"))
	if !errors.Is(err, token.ErrLocked) {
		t.Fatalf("enabling a revoked token: %v", err)
	}
	if e.get(t, "HOTP1").Active {
		t.Fatal("the revoked token was enabled")
	}
}

func TestTokenModuleUnknownAction(t *testing.T) {
	e := newTokEnv(t)
	e.hotp(t, "HOTP1", nil)
	err := e.do(t, "Token", "add tokengroup", nil, tokAdminCall("token_init", "HOTP1"))
	if err == nil || !apierr.Is(err, apierr.Parameter) {
		t.Fatalf("unknown action: %v", err)
	}
}

// TestTokenModuleThroughRun stores definitions and runs them through
// Service.Run: the action runs on the call's token, each run is audited,
// and a later definition sees the token as the earlier one left it.
func TestTokenModuleThroughRun(t *testing.T) {
	e := newTokEnv(t)
	ctx := t.Context()
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)
	for i, d := range []Definition{
		{Name: "lock it", Active: true, Ordering: 1, Events: []string{"validate_check"}, HandlerModule: "Token",
			Action: "disable"},
		{Name: "note it", Active: true, Ordering: 2, Events: []string{"validate_check"}, HandlerModule: "Token",
			Action: "increase tokeninfo", Options: map[string]string{"key": "locked_by_event"}},
		{Name: "broken", Active: true, Ordering: 3, Events: []string{"validate_check"}, HandlerModule: "Token",
			Action: "set failcounter", Options: map[string]string{"fail counter": "1"}},
	} {
		if _, err := e.svc.Set(ctx, d, false); err != nil {
			t.Fatalf("definition %d: %v", i, err)
		}
	}
	if err := e.tokens.Revoke(ctx, "HOTP1"); err != nil {
		t.Fatal(err)
	}
	// A revoked token refuses both changes; the failures are audited and
	// the operation goes on (abort_on_error defaults to false).
	if err := e.svc.Run(ctx, Post, tokAdminCall("validate_check", "HOTP1")); err != nil {
		t.Fatalf("Run: %v", err)
	}
	acts := e.auditActions(t)
	if !tokContains(acts, "POST-EVENT validate_check>>Token:disable | lock it (TokenAdminError)") {
		t.Errorf("audit %q lacks the failed disable", acts)
	}

	e.hotp(t, "HOTP2", &alice)
	if err := e.svc.Run(ctx, Post, tokAdminCall("validate_check", "HOTP2")); err != nil {
		t.Fatalf("Run: %v", err)
	}
	tok := e.get(t, "HOTP2")
	if tok.Active || tok.Info["locked_by_event"] != "1" || tok.FailCount != 1 {
		t.Fatalf("after Run: active %v info %v failcount %d", tok.Active, tok.Info, tok.FailCount)
	}
	acts = e.auditActions(t)
	for _, want := range []string{
		"POST-EVENT validate_check>>Token:disable | lock it",
		"POST-EVENT validate_check>>Token:increase tokeninfo | note it",
		"POST-EVENT validate_check>>Token:set failcounter | broken",
	} {
		if !slices.Contains(acts, want) {
			t.Errorf("audit %q lacks %q", acts, want)
		}
	}
}

func TestTokenModuleAttachApplication(t *testing.T) {
	e := newTokEnv(t)
	e.hotp(t, "HOTP1", nil)
	e.mustDo(t, "Token", "attach application", map[string]string{"application": "offline", "count": "10", "machine ID": "",
		"slot": ""}, tokAdminCall("token_init", "HOTP1"))
	got := e.host.attached
	if len(got) != 1 || got[0].serial != "HOTP1" || got[0].application != "offline" || got[0].hostname != "" ||
		len(got[0].options) != 1 || got[0].options["count"] != "10" {
		t.Fatalf("attached %+v", got)
	}
	if err := e.svc.modules["Token"].Check(t.Context(), Definition{Action: "attach application", Options: map[string]string{}}); err == nil {
		t.Error("attach application without an application was accepted")
	}
}
