package server_test

import (
	"testing"

	"github.com/authsrv/authsrv"
)

// TestSubscriptionStatusLastSeen: a plugin whose clients authenticate here
// is in use, with the time its clients were last seen, even without a
// subscription; one never seen stays null.
func TestSubscriptionStatusLastSeen(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	checkWith(t, e, map[string]string{"User-Agent": "FreeRADIUS"}, "user", "alice", "realm", "realm1", "pass", "wrong")
	checkWith(t, e, map[string]string{"User-Agent": "curl/8.0"}, "user", "alice", "realm", "realm1", "pass", "wrong")

	byApp := map[string]map[string]any{}
	// privacyIDEA sends null for what is unknown here (wantOK refuses
	// nulls).
	r := e.do(t, "GET", "/subscriptions/status", "", "", map[string]string{"Authorization": tok})
	list, _ := at(r.json, "result.value").([]any)
	if r.status != 200 || len(list) == 0 {
		t.Fatalf("GET /subscriptions/status: %d %s", r.status, r.body)
	}
	for _, it := range list {
		m := it.(map[string]any)
		byApp[m["application"].(string)] = m
	}
	radius := byApp["privacyidea-radius"]
	if radius == nil || radius["in_use"] != true || radius["last_seen"] != e.clk.now().UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT") {
		t.Errorf("privacyidea-radius after a FreeRADIUS request: %v", radius)
	}
	pam := byApp["privacyidea-pam"]
	if pam == nil || pam["in_use"] != false || pam["last_seen"] != nil {
		t.Errorf("privacyidea-pam, never seen: %v", pam)
	}
}
