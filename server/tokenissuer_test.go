package server_test

import (
	"net/url"
	"testing"
)

// TestTokenIssuer checks the issuer of the otpauth URL: authsrv by
// default, a tokenissuer parameter where no policy sets one, and the
// tokenissuer enrollment policy (with its tags) for the users it matches,
// even over the parameter (as privacyIDEA's prepolicy replaces it).
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
		{"parameter under the policy", []string{"user", "alice", "realm", "realm1", "serial", "ISS2", "tokenissuer", "Mine {user}"}, "Corp realm1 alice ISS2"},
		{"parameter without a policy", []string{"user", "alice", "realm", "realm2", "tokenissuer", "Mine {user}"}, "Mine alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := issuer(t, tc.kv...); got != tc.want {
				t.Errorf("issuer %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEnrollPolicyReplacesParameter: hotp_hashlib and hotp_otplen of the
// enrollment scope replace the request's hashlib and otplen, so a caller
// cannot enroll around them.
func TestEnrollPolicyReplacesParameter(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/policy/strong", form("scope", "enrollment", "action", "hotp_hashlib=sha256, hotp_otplen=8", "realm", "realm1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "hotp", "genkey", "1", "serial", "POL1", "user", "alice", "realm", "realm1",
		"hashlib", "sha1", "otplen", "6")))
	list := wantOK(t, e.admin(t, tok, "GET", "/token/?serial=POL1", ""))
	tk, _ := at(list, "tokens").([]any)
	if len(tk) != 1 || at(tk[0], "otplen") != float64(8) || at(tk[0], "info.hashlib") != "sha256" {
		t.Errorf("token enrolled under the policy: %v", tk)
	}
}
