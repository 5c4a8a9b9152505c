package server_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/subscription"
)

// subscriptionFile is a signed subscription file for application.
func subscriptionFile(t *testing.T, key crypto.Signer, application string, till time.Time, numTokens int) []byte {
	t.Helper()
	n := numTokens
	sub := subscription.Subscription{Application: application, ForName: "Example Corp", ByName: "Vendor GmbH",
		DateFrom: testStart.AddDate(0, -1, 0).Truncate(24 * time.Hour), DateTill: till, NumTokens: &n, Level: "gold"}
	sig, err := subscription.Sign(sub, key)
	if err != nil {
		t.Fatal(err)
	}
	sub.Signature = sig
	return subscription.Format(sub)
}

func (e *env) uploadSubscription(t *testing.T, tok string, file []byte) reply {
	t.Helper()
	ctype, body := multipartFile(t, "file", "sub.yaml", file)
	r := e.do(t, "POST", "/subscriptions/", ctype, body, map[string]string{"Authorization": tok})
	noNulls(t, r.json, "$")
	return r
}

func TestSubscriptionsAPI(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithSubscriptionKey(key.Public())})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	// In use: three active tokens of two users; the unassigned token and
	// the disabled one do not count.
	for _, tk := range [][2]string{{"S1", "alice"}, {"S2", "alice"}, {"S3", "bob"}, {"S4", "carol.smith"}, {"FREE", ""}} {
		kv := []string{"type", "spass", "serial", tk[0], "pin", "pin-" + tk[0]}
		if tk[1] != "" {
			kv = append(kv, "user", tk[1], "realm", "realm1")
		}
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form(kv...)))
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/disable", form("serial", "S4")))

	till := time.Date(2027, 11, 22, 0, 0, 0, 0, time.UTC)
	if v := wantOK(t, e.uploadSubscription(t, tok, subscriptionFile(t, key, "privacyidea", till, 5))); v != true {
		t.Fatalf("upload value %v", v)
	}

	rows := wantOK(t, e.admin(t, tok, "GET", "/subscriptions/", "")).([]any)
	if len(rows) != 1 {
		t.Fatalf("rows %v", rows)
	}
	row := rows[0].(map[string]any)
	want := map[string]any{"id": 1.0, "application": "privacyidea", "for_name": "Example Corp", "by_name": "Vendor GmbH",
		"date_till": "Mon, 22 Nov 2027 00:00:00 GMT", "num_tokens": 5.0, "level": "gold",
		"timedelta": -365.0, "active_tokens": 3.0, "active_users": 2.0}
	for k, v := range want {
		if row[k] != v {
			t.Errorf("row[%s] = %v, want %v", k, row[k], v)
		}
	}
	if s, _ := row["signature"].(string); !strings.HasPrefix(s, "ed25519:") {
		t.Errorf("signature %v", row["signature"])
	}
	if _, ok := row["for_address"]; ok {
		t.Error("a column that is not set is listed")
	}
	if got := wantOK(t, e.admin(t, tok, "GET", "/subscriptions/privacyidea-cp", "")).([]any); len(got) != 0 {
		t.Errorf("GET /subscriptions/privacyidea-cp: %v", got)
	}

	status := func(state string) map[string]any {
		t.Helper()
		// privacyIDEA sends null for what is unknown (last_seen, and the
		// dates of a plugin without subscription).
		list := wantOK(t, e.do(t, "GET", "/subscriptions/status", "", "", map[string]string{"Authorization": tok})).([]any)
		if len(list) != 1+len(subscription.DashboardPlugins) {
			t.Fatalf("status list %v", list)
		}
		srv := list[0].(map[string]any)
		if srv["application"] != "privacyidea" || srv["is_server"] != true || srv["in_use"] != true || srv["subscription"] != state {
			t.Fatalf("server status %v, want %s", srv, state)
		}
		if v, ok := srv["last_seen"]; !ok || v != nil {
			t.Fatalf("server status without last_seen null: %v", srv)
		}
		for _, p := range list[1:] {
			if at(p, "subscription") == nil || at(p, "application") == "privacyidea" {
				t.Fatalf("plugin status %v", p)
			}
		}
		return srv
	}
	srv := status("valid")
	if srv["days_left"] != 364.0 || srv["date_till"] != "Mon, 22 Nov 2027 00:00:00 GMT" || srv["warning"] != nil {
		t.Errorf("valid status %v", srv)
	}
	accepts := func() {
		t.Helper()
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin-S1"), true, "")
	}
	accepts()

	t.Run("refused files store nothing", func(t *testing.T) {
		good := string(subscriptionFile(t, key, "privacyidea", till, 5))
		_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
		for _, tc := range []struct {
			name, file string
			code       int
			msg        string
		}{
			{"tampered", strings.Replace(good, "num_tokens: 5", "num_tokens: 5000", 1), 101,
				"ERR101: The signature of the subscription file does not match its contents: the file was changed or signed with another key."},
			{"other key", string(subscriptionFile(t, otherKey, "privacyidea", till.AddDate(1, 0, 0), 5000)), 101,
				"ERR101: The signature of the subscription file does not match its contents: the file was changed or signed with another key."},
			{"unsigned", good[:strings.Index(good, "signature:")], 101, "ERR101: The subscription file has no signature."},
			{"no application", strings.Replace(good, "application: privacyidea\n", "", 1), 905,
				`ERR905: Invalid subscription file: the field "application" is missing.`},
			{"not yaml", "application: [", 905, "ERR905: Invalid subscription file: it is not YAML (line 1: did not find expected node content)."},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantError(t, e.uploadSubscription(t, tok, []byte(tc.file)), 400, tc.code, tc.msg)
			})
		}
		wantError(t, e.admin(t, tok, "POST", "/subscriptions/", form("other", "x")), 400, 905, "ERR905: Missing parameter: file")
		rows := wantOK(t, e.admin(t, tok, "GET", "/subscriptions/", "")).([]any)
		if len(rows) != 1 || rows[0].(map[string]any)["num_tokens"] != 5.0 || rows[0].(map[string]any)["date_till"] != "Mon, 22 Nov 2027 00:00:00 GMT" {
			t.Fatalf("after refused uploads: %v", rows)
		}
	})

	t.Run("exceeded warns and validate keeps working", func(t *testing.T) {
		wantOK(t, e.uploadSubscription(t, tok, subscriptionFile(t, key, "privacyidea", till, 1)))
		srv := status("exceeded")
		if w, _ := srv["warning"].(string); !strings.Contains(w, "2 users have an active token, the subscription allows 1") {
			t.Fatalf("exceeded warning %v", srv["warning"])
		}
		accepts()
	})

	t.Run("expired warns and validate keeps working", func(t *testing.T) {
		e.clk.add(400 * 24 * time.Hour)
		tok = e.login(t)
		srv := status("expired")
		if w, _ := srv["warning"].(string); !strings.Contains(w, "expired on 2027-11-22") || srv["days_left"] != -36.0 {
			t.Fatalf("expired status %v", srv)
		}
		row := wantOK(t, e.admin(t, tok, "GET", "/subscriptions/privacyidea", "")).([]any)[0].(map[string]any)
		if row["timedelta"] != 35.0 {
			t.Fatalf("timedelta %v", row["timedelta"])
		}
		accepts()
	})

	t.Run("delete", func(t *testing.T) {
		if v := wantOK(t, e.admin(t, tok, "DELETE", "/subscriptions/privacyidea", "")); v != 1.0 {
			t.Fatalf("delete value %v", v)
		}
		if v := wantOK(t, e.admin(t, tok, "DELETE", "/subscriptions/privacyidea", "")); v != -1.0 {
			t.Fatalf("second delete value %v", v)
		}
		status("none")
	})

	t.Run("rights", func(t *testing.T) {
		userTok, err := server.IssueToken(e.s, "alice", "realm1", "user")
		if err != nil {
			t.Fatal(err)
		}
		const noRole = "ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!"
		for _, r := range []reply{
			e.admin(t, userTok, "GET", "/subscriptions/", ""),
			e.admin(t, userTok, "GET", "/subscriptions/status", ""),
			e.admin(t, userTok, "DELETE", "/subscriptions/privacyidea", ""),
			e.uploadSubscription(t, userTok, subscriptionFile(t, key, "privacyidea", till, 5)),
		} {
			wantError(t, r, 401, 4306, noRole)
		}
		// An admin policy without managesubscription refuses an admin.
		wantOK(t, e.admin(t, tok, "POST", "/policy/limited", form("scope", "admin", "action", "tokenlist", "adminuser", "admin")))
		r := e.admin(t, tok, "GET", "/subscriptions/status", "")
		if r.status != 403 || at(r.json, "result.error.code") != 303.0 {
			t.Fatalf("admin without managesubscription: %d %s", r.status, r.body)
		}
		if r := e.uploadSubscription(t, tok, subscriptionFile(t, key, "privacyidea", till, 5)); r.status != 403 {
			t.Fatalf("upload without managesubscription: %d %s", r.status, r.body)
		}
	})
}

func TestSubscriptionsWithoutKey(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	wantError(t, e.uploadSubscription(t, tok, subscriptionFile(t, key, "privacyidea", testStart.AddDate(1, 0, 0), 5)), 400, 101,
		"ERR101: No subscription key is configured: the server refuses every subscription file until its operator sets the vendor's public key (option -subscription-key).")
	if rows := wantOK(t, e.admin(t, tok, "GET", "/subscriptions/", "")).([]any); len(rows) != 0 {
		t.Fatalf("stored without a key: %v", rows)
	}
}
