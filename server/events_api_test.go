package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
)

// eventEnv is tokenEnv with a script directory for the Script module.
func eventEnv(t *testing.T, opts ...authsrv.Option) (*env, string, string) {
	t.Helper()
	dir := t.TempDir()
	e := newEnvWith(t, append([]authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithEventScriptDir(dir)}, opts...))
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	return e, tok, dir
}

// postEvent creates a definition from a JSON body and returns its id.
func postEventDef(t *testing.T, e *env, tok string, def map[string]any) float64 {
	t.Helper()
	b, _ := json.Marshal(def)
	r := e.do(t, "POST", "/event", "application/json", string(b), map[string]string{"Authorization": tok})
	id, ok := wantOK(t, r).(float64)
	if !ok || id <= 0 {
		t.Fatalf("POST /event: %s", r.body)
	}
	return id
}

func TestEventEndpoints(t *testing.T) {
	e, tok, _ := eventEnv(t)
	id := postEventDef(t, e, tok, map[string]any{"name": "Send an email", "event": "token_init,token_enable",
		"handlermodule": "UserNotification", "action": "sendmail", "option.emailconfig": "mail1",
		"option.To": "tokenowner", "option.subject": "Hi", "conditions": map[string]any{"realm": "realm1", "tokentype": "hotp,totp"}})
	list := wantOK(t, e.admin(t, tok, "GET", "/event/", "")).([]any)
	if len(list) != 1 {
		t.Fatalf("GET /event/: %v", list)
	}
	d := list[0].(map[string]any)
	want := map[string]any{"id": id, "name": "Send an email", "active": true, "ordering": float64(0), "position": "post",
		"abort_on_error": false, "handlermodule": "UserNotification", "action": "sendmail", "condition": ""}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("%s = %v, want %v", k, d[k], v)
		}
	}
	if ev := d["event"].([]any); len(ev) != 2 || ev[0] != "token_init" || ev[1] != "token_enable" {
		t.Errorf("event %v", ev)
	}
	if at(d, "options.emailconfig") != "mail1" || at(d, "conditions.tokentype") != "hotp,totp" {
		t.Errorf("options/conditions %v", d)
	}
	if one := wantOK(t, e.admin(t, tok, "GET", "/event/1", "")).([]any); len(one) != 1 {
		t.Errorf("GET /event/1 %v", one)
	}
	if none := wantOK(t, e.admin(t, tok, "GET", "/event/99", "")).([]any); len(none) != 0 {
		t.Errorf("GET /event/99 %v", none)
	}
	mods := wantOK(t, e.admin(t, tok, "GET", "/event/handlermodules", "")).([]any)
	wantMods := []string{"UserNotification", "Token", "Script", "Federation", "Counter", "RequestMangler",
		"ResponseMangler", "Logging", "CustomUserAttributes", "WebHook"}
	if len(mods) != len(wantMods) {
		t.Fatalf("handlermodules %v", mods)
	}
	for i, m := range wantMods {
		if mods[i] != m {
			t.Errorf("handlermodules[%d] = %v, want %s", i, mods[i], m)
		}
	}
	avail := wantOK(t, e.admin(t, tok, "GET", "/event/available", "")).([]any)
	if len(avail) < 30 || avail[0] != "auth" || avail[1] != "validate_check" {
		t.Errorf("available %v", avail)
	}
	if p := wantOK(t, e.admin(t, tok, "GET", "/event/positions/Federation", "")).([]any); len(p) != 1 || p[0] != "post" {
		t.Errorf("positions Federation %v", p)
	}
	if p := wantOK(t, e.admin(t, tok, "GET", "/event/positions/Nope", "")).([]any); len(p) != 0 {
		t.Errorf("positions Nope %v", p)
	}
	if d := wantOK(t, e.admin(t, tok, "GET", "/event/defaults/Federation", "")); at(d, "abort_on_error") != true {
		t.Errorf("defaults Federation %v", d)
	}
	if d := wantOK(t, e.admin(t, tok, "GET", "/event/defaults/Token", "")); at(d, "abort_on_error") != false {
		t.Errorf("defaults Token %v", d)
	}
	acts := wantOK(t, e.admin(t, tok, "GET", "/event/actions/Token", "")).(map[string]any)
	if _, ok := acts["disable"]; !ok || at(acts, "set tokeninfo.key.required") != true {
		t.Errorf("actions Token %v", acts)
	}
	conds := wantOK(t, e.admin(t, tok, "GET", "/event/conditions/Token", "")).(map[string]any)
	if at(conds, "failcounter.group") != "counter" || at(conds, "tokentype.group") != "token" || at(conds, "result_value.type") == nil {
		t.Errorf("conditions %v", conds)
	}
	// Enable, disable, update, delete.
	if v := wantOK(t, e.admin(t, tok, "POST", "/event/disable/1", "")); v != float64(1) {
		t.Errorf("disable %v", v)
	}
	if at(wantOK(t, e.admin(t, tok, "GET", "/event/1", "")).([]any)[0], "active") != false {
		t.Error("still active")
	}
	wantOK(t, e.admin(t, tok, "POST", "/event/enable/1", ""))
	postEventDef(t, e, tok, map[string]any{"id": 1, "name": "renamed", "event": []string{"token_init"},
		"handlermodule": "Logging", "action": "logging"})
	d = wantOK(t, e.admin(t, tok, "GET", "/event/1", "")).([]any)[0].(map[string]any)
	if d["name"] != "renamed" || len(d["options"].(map[string]any)) != 0 || len(d["conditions"].(map[string]any)) != 0 {
		t.Errorf("update is no full replacement: %v", d)
	}
	wantError(t, e.admin(t, tok, "POST", "/event/enable/7", ""), 404, 601, "ERR601: The requested EventHandler could not be found.")
	wantError(t, e.admin(t, tok, "DELETE", "/event/7", ""), 404, 601, "ERR601: The requested EventHandler could not be found.")
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/event/1", "")); v != float64(1) {
		t.Errorf("delete %v", v)
	}
	// Bad input changes nothing.
	wantError(t, e.admin(t, tok, "POST", "/event", form("name", "x", "event", "token_init", "handlermodule", "Nope", "action", "a")),
		400, 905, "ERR905: Unknown handler module: Nope")
	wantError(t, e.admin(t, tok, "POST", "/event", form("name", "x", "event", "token_init", "handlermodule", "Logging", "action", "logging", "conditions", "[1]")),
		400, 905, "ERR905: The 'conditions' parameter must be a dictionary.")
	wantError(t, e.admin(t, tok, "POST", "/event", form("event", "token_init", "handlermodule", "Logging", "action", "logging")),
		400, 905, "ERR905: Missing parameter: name")
	wantError(t, e.admin(t, tok, "POST", "/event", form("name", "w", "event", "validate_check", "handlermodule", "WebHook", "action", "post_webhook",
		"option.URL", "ftp://127.0.0.1/x", "option.content_type", "json", "option.data", "{}")), 400, 905, "ERR905: The webhook URL must be an http or https URL.")
	wantError(t, e.admin(t, tok, "POST", "/event", form("name", "s", "event", "validate_check", "handlermodule", "Script", "action", "../x")), 400, 905, "ERR905: The script name must be the name of a file in the script directory.")
	if list := wantOK(t, e.admin(t, tok, "GET", "/event/", "")).([]any); len(list) != 0 {
		t.Errorf("bad definitions were stored: %v", list)
	}
	// Rights: a user may not read definitions; an admin policy without
	// eventhandling_write refuses writes.
	wantOK(t, e.admin(t, tok, "POST", "/policy/adm", form("scope", "admin", "action", "eventhandling_read")))
	wantError(t, e.admin(t, tok, "POST", "/event", form("name", "x", "event", "token_init", "handlermodule", "Logging", "action", "logging")),
		403, 303, "ERR303: Admin actions are defined, but the action eventhandling_write is not allowed!")
	wantOK(t, e.admin(t, tok, "GET", "/event/", ""))
}

// TestEventScenarios are the scenarios over HTTP.
func TestEventScenarios(t *testing.T) {
	sink := testsvc.NewSMTPSink(t)
	var (
		mu    sync.Mutex
		hooks []map[string]any
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		hooks = append(hooks, m)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	e, tok, dir := eventEnv(t)
	if err := e.s.Notify().SetSMTP(t.Context(), notify.SMTPServer{Identifier: "mail1", Server: "127.0.0.1", Port: sink.Port,
		Sender: "authsrv@example.org", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	postEventDef(t, e, tok, map[string]any{"name": "mail on enroll", "event": "token_init", "handlermodule": "UserNotification",
		"action": "sendmail", "position": "post", "conditions": map[string]any{"tokentype": "hotp"},
		"option.emailconfig": "mail1", "option.To": "tokenowner", "option.subject": "New token {serial}", "option.body": "Hello {user}, token {serial}"})
	postEventDef(t, e, tok, map[string]any{"name": "lock after 3", "event": "validate_check", "handlermodule": "Token",
		"action": "disable", "conditions": map[string]any{"result_value": "False", "failcounter": ">2"}})
	postEventDef(t, e, tok, map[string]any{"name": "hook", "event": "validate_check", "handlermodule": "WebHook",
		"action": "post_webhook", "option.URL": hook.URL, "option.content_type": "application/json", "option.replace": "True",
		"option.data": `{"serial": "{serial}", "user": "{username}"}`})
	postEventDef(t, e, tok, map[string]any{"name": "count", "event": "validate_check", "handlermodule": "Counter",
		"action": "increase_counter", "option.counter_name": "logins_ok", "conditions": map[string]any{"result_value": "True"}})
	postEventDef(t, e, tok, map[string]any{"name": "quiet", "event": "validate_check", "handlermodule": "ResponseMangler",
		"action": "delete", "option.JSON pointer": "/detail/message"})

	// UserNotification: only the HOTP enrollment mails alice.
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "totp", "serial", "T1", "genkey", "1", "user", "alice", "realm", "realm1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "V1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	deadline := time.Now().Add(10 * time.Second)
	for len(sink.Messages()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 || len(msgs[0].To) != 1 || msgs[0].To[0] != "alice@example.org" || !strings.Contains(msgs[0].Data, "New token V1") {
		t.Fatalf("mails %+v", msgs)
	}
	wantOK(t, e.admin(t, tok, "DELETE", "/token/T1", ""))

	// A success: counted, the hook gets the serial, no detail.message.
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(1))
	if at(r.json, "result.value") != true {
		t.Fatalf("check %s", r.body)
	}
	if _, ok := r.json["detail"].(map[string]any)["message"]; ok || at(r.json, "detail.serial") != "V1" {
		t.Errorf("ResponseMangler did not delete /detail/message: %s", r.body)
	}
	if n, _, _ := e.s.Events().Counter(t.Context(), "logins_ok"); n != 1 {
		t.Errorf("counter %d", n)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(hooks)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if len(hooks) == 0 || hooks[0]["serial"] != "V1" || hooks[0]["user"] != "alice" {
		t.Errorf("webhook bodies %v", hooks)
	}
	mu.Unlock()

	// Three wrong OTPs: the third sees failcounter 3 and disables V1.
	for i := range 3 {
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "")
		if active := listOne(t, e, tok, "V1")["active"]; active != (i < 2) {
			t.Fatalf("after %d wrong OTPs active = %v", i+1, active)
		}
	}
	if n, _, _ := e.s.Events().Counter(t.Context(), "logins_ok"); n != 1 {
		t.Errorf("failures were counted: %d", n)
	}
	// Each handler run has its own audit entry.
	a := wantOK(t, e.admin(t, tok, "GET", "/audit/?action="+url.QueryEscape("*POST-EVENT validate_check>>Token:disable*"), ""))
	if at(a, "count") != float64(1) {
		t.Errorf("handler audit entries: %v", a)
	}

	// Script in wait mode with raise_error aborts the request.
	script := filepath.Join(dir, "fail.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	postEventDef(t, e, tok, map[string]any{"name": "gate", "event": "token_setpin", "handlermodule": "Script", "position": "pre",
		"action": "fail.sh", "option.background": "wait", "option.raise_error": "True"})
	r = e.admin(t, tok, "POST", "/token/setpin", form("serial", "V1", "otppin", "newpin"))
	if r.status == 200 {
		t.Fatalf("the failing script did not abort: %s", r.body)
	}
}

// TestWebHookBurst: 200 parallel checks with a WebHook to a server that
// does not answer until the test lets it all finish: the hooks run in the
// background, so the checks do not wait for them.
func TestWebHookBurst(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	e, tok, _ := eventEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "V1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	postEventDef(t, e, tok, map[string]any{"name": "hook", "event": "validate_check", "handlermodule": "WebHook",
		"action": "post_webhook", "option.URL": slow.URL, "option.content_type": "json", "option.data": `{"s": "x"}`})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				r := e.do(t, "POST", "/validate/check", formType, form("user", "alice", "realm", "realm1", "pass", "pin000000"), nil)
				if r.status != 200 {
					t.Errorf("check %d %s", r.status, r.body)
				}
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the checks wait for a webhook that does not answer")
	}
	// The hooks were sent, and are still unanswered.
	deadline := time.Now().Add(10 * time.Second)
	for hits.Load() < 16 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := hits.Load(); n < 16 {
		t.Errorf("%d webhooks reached the server", n)
	}
}

// TestFederationForwardsCheck: a Federation definition on validate_check
// forwards the request, password included, to another authsrv and answers
// its response.
func TestFederationForwardsCheck(t *testing.T) {
	remote, rtok, _ := eventEnv(t)
	wantOK(t, remote.admin(t, rtok, "POST", "/token/init", form("serial", "R1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	rs := httptest.NewServer(remote.h)
	t.Cleanup(rs.Close)

	e, tok, _ := eventEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/privacyideaserver/remote", form("url", rs.URL)))
	postEventDef(t, e, tok, map[string]any{"name": "fwd", "event": "validate_check", "handlermodule": "Federation",
		"action": "forward", "option.privacyIDEA": "remote"})
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(0))
	if at(r.json, "result.value") != true || at(r.json, "detail.serial") != "R1" || at(r.json, "detail.origin") == nil {
		t.Fatalf("forwarded check: %s", r.body)
	}
	// The remote counted the OTP: the same one fails there now.
	r = check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(0))
	if at(r.json, "result.value") != false {
		t.Fatalf("replayed OTP: %s", r.body)
	}
	if strings.Contains(e.log.String(), "pin"+hotpAt(0)) {
		t.Error("the forwarded password reached the log")
	}
}

// TestRequestManglerValidate: a pre RequestMangler that sets the realm
// decides the realm of the check; a challenge answered with "state" (no
// transaction_id) still works with a pre handler defined.
func TestRequestManglerValidate(t *testing.T) {
	e, tok, _ := eventEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "V1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/other", form("resolvers", "mem1")))
	postEventDef(t, e, tok, map[string]any{"name": "realm", "event": "validate_check", "handlermodule": "RequestMangler",
		"position": "pre", "action": "set", "option.parameter": "realm", "option.value": "realm1"})
	wantAuth(t, check(t, e, "user", "alice", "realm", "other", "pass", "pin"+hotpAt(0)), true, "matching 1 tokens")

	// Challenge-response by state: the PIN triggers an e-mail-less HOTP
	// challenge through the challenge_response policy.
	wantOK(t, e.admin(t, tok, "POST", "/policy/cr", form("scope", "authentication", "action", "challenge_response=hotp")))
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
	txid, _ := at(r.json, "detail.transaction_id").(string)
	if txid == "" {
		t.Fatalf("no challenge: %s", r.body)
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "state", txid, "pass", hotpAt(1)), true, "")
}
