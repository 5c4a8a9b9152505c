package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/server"
)

const errSessionEnded = "ERR4304: Authentication failure. Error decoding the Authorization token: The administrator's session has ended (account deleted, disabled or password changed): log in again"

var probeAdmin = server.TestRoute{Method: "GET", Path: "/probe/admin", Access: "admin", Action: "probe",
	Fn: func(ctx context.Context, p *server.Params) (any, map[string]any, error) { return true, nil, nil }}

// loginAs logs name in through POST /auth and returns the reply.
func (e *env) loginAs(t *testing.T, name, pw string) reply {
	t.Helper()
	return e.do(t, "POST", "/auth", formType, form("username", name, "password", pw), nil)
}

func tokenOf(t *testing.T, r reply) string {
	t.Helper()
	tok, _ := at(r.json, "result.value.token").(string)
	if r.status != 200 || tok == "" {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	return tok
}

// TestAdminSessionEnds: deleting, disabling or re-passwording a local
// administrator refuses its tokens on the very next request (through the
// HTTP server), other administrators' tokens are untouched, and a new
// login works where the account still may log in.
func TestAdminSessionEnds(t *testing.T) {
	e := newEnv(t, probeAdmin)
	ctx := t.Context()
	local := caller.Caller{}
	other := e.login(t)
	get := func(tok string) reply {
		return e.do(t, "GET", "/probe/admin", "", "", map[string]string{"Authorization": tok})
	}
	for _, tc := range []struct {
		name   string
		change func(name string) error
		// relogin is the password a new login uses ("" when none works).
		relogin string
	}{
		{"deleted", func(n string) error { return e.s.Ops().DeleteAdmin(ctx, local, n) }, ""},
		{"password changed", func(n string) error { return e.s.Ops().SetAdminPassword(ctx, local, n, "n3w-pass") }, "n3w-pass"},
		{"disabled", func(n string) error { return e.s.Ops().SetAdminDisabled(ctx, local, n, true) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "ops-" + strings.ReplaceAll(tc.name, " ", "-")
			if err := e.s.Ops().AddAdmin(ctx, local, name, "0ld-pass"); err != nil {
				t.Fatal(err)
			}
			tok := tokenOf(t, e.loginAs(t, name, "0ld-pass"))
			if r := get(tok); r.status != 200 {
				t.Fatalf("before the change: %d %s", r.status, r.body)
			}
			if err := tc.change(name); err != nil {
				t.Fatal(err)
			}
			wantError(t, get(tok), 401, 4304, errSessionEnded)
			if r := get(other); r.status != 200 {
				t.Errorf("another administrator's token: %d %s", r.status, r.body)
			}
			r := e.loginAs(t, name, "0ld-pass")
			wantError(t, r, 401, 4031, "ERR4031: Authentication failure. Wrong credentials")
			if tc.relogin != "" {
				if r := get(tokenOf(t, e.loginAs(t, name, tc.relogin))); r.status != 200 {
					t.Errorf("a new login's token: %d %s", r.status, r.body)
				}
			}
		})
	}
	t.Run("enabled again", func(t *testing.T) {
		const name = "ops-disabled"
		if err := e.s.Ops().SetAdminDisabled(ctx, local, name, false); err != nil {
			t.Fatal(err)
		}
		fresh := tokenOf(t, e.loginAs(t, name, "0ld-pass"))
		if r := get(fresh); r.status != 200 {
			t.Errorf("after enabling: %d %s", r.status, r.body)
		}
		list, err := e.s.Admins().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list {
			if a.Disabled {
				t.Errorf("%s still listed as disabled", a.Name)
			}
		}
	})
	t.Run("a deleted name created again", func(t *testing.T) {
		const name = "ops-again"
		if err := e.s.Ops().AddAdmin(ctx, local, name, "pw-one"); err != nil {
			t.Fatal(err)
		}
		tok := tokenOf(t, e.loginAs(t, name, "pw-one"))
		if err := e.s.Ops().DeleteAdmin(ctx, local, name); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Ops().AddAdmin(ctx, local, name, "pw-one"); err != nil {
			t.Fatal(err)
		}
		wantError(t, get(tok), 401, 4304, errSessionEnded)
	})
	t.Run("a forged stamp", func(t *testing.T) {
		// The stamp is no credential: a token still needs the key.
		forged := sign(t, jwt.SigningMethodHS256, otherKey, jwt.MapClaims{"username": "admin", "role": "admin", "exp": e.clk.now().Add(time.Hour).Unix()})
		wantError(t, get(forged), 401, 4304, "ERR4304: Authentication failure. Error decoding the Authorization token: Signature verification failed")
	})
}

// TestJWTKeyRotationHTTP is S11 and B6 through the HTTP server: after a
// rotation the token of the old key keeps working until it expires, a
// new login's token carries the new kid, and tokens naming an unknown key
// or a dropped one are 401 with privacyIDEA's decoding error, never 500.
func TestJWTKeyRotationHTTP(t *testing.T) {
	clk := &clock{t: testStart}
	dir := filepath.Join(t.TempDir(), "data")
	s, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithKDFParams(cheapKDF), authsrv.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e := &env{s: s, h: server.NewWithTestRoutes(s, probeAdmin), clk: clk, log: &syncBuffer{}}
	if err := s.Ops().AddAdmin(t.Context(), caller.Caller{}, "admin", adminPass); err != nil {
		t.Fatal(err)
	}
	get := func(tok string) reply {
		return e.do(t, "GET", "/probe/admin", "", "", map[string]string{"Authorization": tok})
	}
	old := e.login(t)
	oldKID := jwtKID(t, old)
	clk.add(30 * time.Minute)
	k, err := s.Ops().RotateJWTKey(t.Context(), caller.Caller{}, authsrv.JWTRotation{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := e.login(t)
	if got := jwtKID(t, fresh); got != k.KID || got == oldKID {
		t.Fatalf("new login's kid %q, want %q (old %q)", got, k.KID, oldKID)
	}
	for name, tok := range map[string]string{"old": old, "new": fresh} {
		if r := get(tok); r.status != 200 {
			t.Errorf("%s token after the rotation: %d %s", name, r.status, r.body)
		}
	}
	oldKey, err := os.ReadFile(filepath.Join(dir, authsrv.JWTKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	signKID := func(key []byte, kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"username": "admin", "role": "admin", "exp": clk.now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		raw, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	const unknownKID = "ERR4304: Authentication failure. Error decoding the Authorization token: The token's key id is unknown"
	wantError(t, get(signKID(testKey, "0011223344556677")), 401, 4304, unknownKID)

	clk.add(30*time.Minute + time.Second) // the old token's expiry
	wantError(t, get(old), 401, 4305, "ERR4305: Authentication failure. Your token has expired: Signature has expired")
	if r := get(fresh); r.status != 200 {
		t.Errorf("new token: %d %s", r.status, r.body)
	}
	// The old key verifies until the last session token it signed expires
	// (an hour after the rotation), then names an unknown key.
	// (The forged token has no session stamp: past the key check, the
	// session check refuses it.)
	withOld := signKID(oldKey, oldKID)
	wantError(t, get(withOld), 401, 4304, errSessionEnded)
	clk.add(30 * time.Minute)
	wantError(t, get(withOld), 401, 4304, unknownKID)
	wantError(t, get(old), 401, 4304, unknownKID)
}

// jwtKID is a token's kid header.
func jwtKID(t *testing.T, raw string) string {
	t.Helper()
	tok, _, err := jwt.NewParser().ParseUnverified(raw, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := tok.Header["kid"].(string)
	return kid
}
