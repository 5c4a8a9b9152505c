package server_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
)

// keysOf lists an object's keys, sorted.
func keysOf(v any) []string {
	m, _ := v.(map[string]any)
	return slices.Sorted(maps.Keys(m))
}

// TestConfigAnswerKeys: the configuration answers carry every key
// privacyIDEA sends, null where privacyIDEA sends null (a realm
// resolver's unset priority, a RADIUS server's unset options).
func TestConfigAnswerKeys(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", "type=memresolver"))
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem2", "type=memresolver"))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", `{"resolvers":["mem1","mem2"],"priority.mem2":2}`))

	r1 := wantOK(t, e.admin(t, tok, "GET", "/realm/", "")).(map[string]any)["realm1"]
	if got := fmt.Sprint(keysOf(r1)); got != "[default id resolver]" {
		t.Errorf("realm keys %s", got)
	}
	for _, it := range at(r1, "resolver").([]any) {
		entry := it.(map[string]any)
		if got := fmt.Sprint(keysOf(entry)); got != "[name node priority type]" {
			t.Errorf("realm resolver keys %s", got)
		}
		want := map[string]any{"mem1": nil, "mem2": float64(2)}[entry["name"].(string)]
		if entry["priority"] != want {
			t.Errorf("%s priority %v, want %v", entry["name"], entry["priority"], want)
		}
	}
	def := wantOK(t, e.admin(t, tok, "GET", "/defaultrealm", ""))
	if p, ok := at(def, "realm1.resolver").([]any)[0].(map[string]any)["priority"]; !ok || (p != nil && p != float64(2)) {
		t.Errorf("GET /defaultrealm entry priority %v (present %v)", p, ok)
	}

	res := wantOK(t, e.admin(t, tok, "GET", "/resolver/mem1", "")).(map[string]any)["mem1"]
	if got := fmt.Sprint(keysOf(res)); got != "[censor_keys data resolvername type]" {
		t.Errorf("resolver keys %s", got)
	}

	wantOK(t, e.admin(t, tok, "POST", "/radiusserver/rad1", form("server", "127.0.0.1", "secret", "s3cret")))
	wantOK(t, e.admin(t, tok, "POST", "/radiusserver/rad2", `{"server":"127.0.0.1","secret":"s3cret","options":{"message_authenticator":true}}`))
	for _, it := range wantOK(t, e.admin(t, tok, "GET", "/radiusserver/", "")).([]any) {
		d := it.(map[string]any)
		if got := fmt.Sprint(keysOf(d)); got != "[description dictionary identifier options port retries secret server timeout]" {
			t.Errorf("radius keys %s", got)
		}
		if d["identifier"] == "rad1" && d["options"] != nil {
			t.Errorf("rad1 options %v, want null", d["options"])
		}
		if d["identifier"] == "rad2" && fmt.Sprint(d["options"]) != "map[message_authenticator:true]" {
			t.Errorf("rad2 options %v", d["options"])
		}
	}

	wantOK(t, e.admin(t, tok, "POST", "/smtpserver/mail1", form("server", "127.0.0.1")))
	smtp := wantOK(t, e.admin(t, tok, "GET", "/smtpserver/", "")).([]any)[0]
	if got := fmt.Sprint(keysOf(smtp)); got != "[certificate description dont_send_on_error enqueue_job identifier implicit_tls password port private_key private_key_password sender server smime timeout tls username]" {
		t.Errorf("smtp keys %s", got)
	}
}

// TestConfigWritesAuditedOnce: a configuration write through HTTP leaves
// exactly one audit entry, whether it succeeded, was refused for want of
// the right, or failed on its parameters.
func TestConfigWritesAuditedOnce(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)
	count := func(action string) (ok, failed int) {
		t.Helper()
		err := e.s.Audit().Each(context.Background(), audit.Query{Filters: map[string]string{"action": action}}, func(r audit.Row) error {
			if fmt.Sprint(r["success"]) == "1" {
				ok++
			} else {
				failed++
			}
			if r["administrator"] != "admin" {
				t.Errorf("%s: administrator %v", action, r["administrator"])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ok, failed
	}
	wantOK(t, e.admin(t, tok, "POST", "/policy/p1", form("scope", "user", "action", "enable")))
	if ok, failed := count("POST /policy/p1"); ok != 1 || failed != 0 {
		t.Errorf("POST /policy/p1: %d successes, %d failures", ok, failed)
	}
	wantError(t, e.admin(t, tok, "POST", "/policy/p2", form("action", "enable")), 400, 905, "ERR905: Missing parameter: scope")
	if ok, failed := count("POST /policy/p2"); ok != 0 || failed != 1 {
		t.Errorf("POST /policy/p2: %d successes, %d failures", ok, failed)
	}

	wantOK(t, e.admin(t, tok, "POST", "/policy/others", form("scope", "admin", "action", "policyread", "adminuser", "someone-else")))
	wantError(t, e.admin(t, tok, "POST", "/policy/p3", form("scope", "user", "action", "enable")), 403, 303,
		"ERR303: Admin actions are defined, but the action policywrite is not allowed!")
	wantError(t, e.admin(t, tok, "POST", "/policy/p4", form("action", "enable")), 403, 303,
		"ERR303: Admin actions are defined, but the action policywrite is not allowed!")
	wantError(t, e.admin(t, tok, "DELETE", "/realm/realm9", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action resolverdelete is not allowed!")
	for _, a := range []string{"POST /policy/p3", "POST /policy/p4", "DELETE /realm/realm9"} {
		if ok, failed := count(a); ok != 0 || failed != 1 {
			t.Errorf("%s: %d successes, %d failures", a, ok, failed)
		}
	}
}
