package server_test

import (
	"net/url"
	"testing"
)

// TestTokenIssuer checks the issuer of the otpauth URL: authsrv by
// default, the tokenissuer enrollment policy (with its tags) for the users
// it matches, and a tokenissuer parameter before both.
func TestTokenIssuer(t *testing.T) {
	e, tok := tokenEnv(t)
	issuer := func(t *testing.T, kv ...string) string {
		t.Helper()
		r := e.admin(t, tok, "POST", "/token/init", form(append([]string{"type", "hotp", "genkey", "1"}, kv...)...))
		wantOK(t, r)
		raw, _ := at(r.json, "detail.googleurl.value").(string)
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("googleurl %q: %v", raw, err)
		}
		return u.Query().Get("issuer")
	}
	if got := issuer(t, "user", "alice", "realm", "realm1"); got != "authsrv" {
		t.Errorf("default issuer %q, want authsrv", got)
	}
	wantOK(t, e.admin(t, tok, "POST", "/policy/iss", form("scope", "enrollment", "action", "tokenissuer=Corp {realm} {user} {serial}", "realm", "realm1")))
	tests := []struct {
		name string
		kv   []string
		want string
	}{
		{"policy with tags", []string{"user", "alice", "realm", "realm1", "serial", "ISS1"}, "Corp realm1 alice ISS1"},
		{"policy of another realm", []string{"user", "alice", "realm", "realm2"}, "authsrv"},
		{"parameter", []string{"user", "alice", "realm", "realm1", "tokenissuer", "Mine {user}"}, "Mine alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := issuer(t, tc.kv...); got != tc.want {
				t.Errorf("issuer %q, want %q", got, tc.want)
			}
		})
	}
}
