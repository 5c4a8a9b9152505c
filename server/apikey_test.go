package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/authsrv/authsrv/server"
)

const (
	errNoKey    = "ERR303: No valid API key was passed."
	errNotAKey  = "ERR303: A correct JWT was passed, but it was no API key."
	errKeyAdmin = "ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!"
	errKeyUser  = "ERR4306: Authentication failure. You do not have the necessary role (['user', 'admin']) to access this resource!"
)

// checkWith sends /validate/check with the given headers.
func checkWith(t *testing.T, e *env, hdr map[string]string, kv ...string) reply {
	t.Helper()
	r := e.do(t, "POST", "/validate/check", formType, form(kv...), hdr)
	noNulls(t, r.json, "$")
	return r
}

func apiKey(t *testing.T, e *env, validity time.Duration) string {
	t.Helper()
	k, exp, err := server.NewAPIKey(e.s, validity)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.clk.now().Add(validity); !exp.Equal(want) {
		t.Errorf("expiry %v, want %v", exp, want)
	}
	return k
}

func TestAPIKeyRequired(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "AK1", "alice", "pin")
	key := apiKey(t, e, 24*time.Hour)

	// Without the policy no key is needed.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), true, "matching 1 tokens")

	setPolicy(t, e, tok, "apikey", "authorization", "api_key_required")
	other := e.login(t)
	forged := sign(t, jwt.SigningMethodHS256, otherKey, jwt.MapClaims{"role": "validate", "exp": e.clk.now().Add(time.Hour).Unix()})
	noExp := sign(t, jwt.SigningMethodHS256, testKey, jwt.MapClaims{"role": "validate"})
	refused := []struct {
		name string
		hdr  map[string]string
		msg  string
	}{
		{"no header", nil, errNoKey},
		{"garbage", map[string]string{"Authorization": "not-a-jwt"}, errNoKey},
		{"other key", map[string]string{"Authorization": forged}, errNoKey},
		{"no expiry", map[string]string{"Authorization": noExp}, errNoKey},
		{"admin token", map[string]string{"Authorization": other}, errNotAKey},
		{"key in another header", map[string]string{"X-API-Key": key}, errNoKey},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			// The right OTP: a refused request must not consume it.
			wantError(t, checkWith(t, e, tc.hdr, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1]), 403, 303, tc.msg)
		})
	}
	if fc := listOne(t, e, tok, "AK1")["failcount"]; fc != float64(0) {
		t.Errorf("refused requests reached the token: failcount %v", fc)
	}
	t.Run("accepted", func(t *testing.T) {
		wantAuth(t, checkWith(t, e, map[string]string{"Authorization": key}, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1]), true, "matching 1 tokens")
		wantAuth(t, checkWith(t, e, map[string]string{"PI-Authorization": key}, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2]), true, "matching 1 tokens")
		wantAuth(t, checkWith(t, e, map[string]string{"Authorization": "Bearer " + key}, "user", "alice@realm1", "pass", "pin"+rfcHOTP[3]), true, "matching 1 tokens")
		// a wrong password with a key is an ordinary failure
		wantAuth(t, checkWith(t, e, map[string]string{"Authorization": key}, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
		// the serial path too
		wantError(t, check(t, e, "serial", "AK1", "pass", "pin"+rfcHOTP[4]), 403, 303, errNoKey)
		wantAuth(t, checkWith(t, e, map[string]string{"Authorization": key}, "serial", "AK1", "pass", "pin"+rfcHOTP[4]), true, "matching 1 tokens")
	})
	t.Run("samlcheck and radiuscheck", func(t *testing.T) {
		for _, path := range []string{"/validate/samlcheck", "/validate/radiuscheck", "/validate/check/"} {
			wantError(t, e.do(t, "GET", path+"?"+form("user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[5]), "", "", nil), 403, 303, errNoKey)
		}
		r := e.do(t, "POST", "/validate/radiuscheck", formType, form("user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[5]), map[string]string{"Authorization": key})
		if r.status != 204 {
			t.Errorf("radiuscheck with a key: %d %s", r.status, r.body)
		}
		r = e.do(t, "POST", "/validate/samlcheck", formType, form("user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[6]), map[string]string{"Authorization": key})
		if r.status != 200 || at(r.json, "result.value.auth") != true {
			t.Errorf("samlcheck with a key: %d %s", r.status, r.body)
		}
	})
	t.Run("unknown user learns nothing without a key", func(t *testing.T) {
		wantError(t, check(t, e, "user", "eve", "realm", "realm1", "pass", "x"), 403, 303, errNoKey)
		wantError(t, checkWith(t, e, map[string]string{"Authorization": key}, "user", "eve", "realm", "realm1", "pass", "x"), 400, 904, "ERR904: User <eve@realm1> does not exist.")
	})
	t.Run("expired", func(t *testing.T) {
		e.clk.add(25 * time.Hour)
		wantError(t, checkWith(t, e, map[string]string{"Authorization": key}, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[7]), 403, 303, errNoKey)
		fresh := apiKey(t, e, time.Hour)
		wantAuth(t, checkWith(t, e, map[string]string{"Authorization": fresh}, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[7]), true, "matching 1 tokens")
	})
	t.Run("policy matched on the request's user", func(t *testing.T) {
		tok := e.login(t) // the clock moved past the admin token's lifetime
		setPolicy(t, e, tok, "apikey", "authorization", "api_key_required", "realm", "realm2")
		// realm1 is not covered: no key needed
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[8]), true, "matching 1 tokens")
		// realm2 is, also as the default realm
		wantError(t, check(t, e, "user", "bob", "realm", "realm2", "pass", "x"), 403, 303, errNoKey)
		wantError(t, check(t, e, "user", "bob@realm2", "pass", "x"), 403, 303, errNoKey)
		wantOK(t, e.admin(t, tok, "POST", "/defaultrealm/realm2", ""))
		wantError(t, check(t, e, "user", "bob", "pass", "x"), 403, 303, errNoKey)
		// a client outside the policy's client list needs none
		setPolicy(t, e, tok, "apikey", "authorization", "api_key_required", "client", "10.0.0.0/8")
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[9]), true, "matching 1 tokens")
		delPolicy(t, e, tok, "apikey")
	})
	if strings.Contains(e.log.String(), key) || strings.Contains(e.log.String(), other) {
		t.Error("a JWT reached the log")
	}
}

// TestAPIKeyOpensNoAdminOrUserEndpoint: an API key is only good for the
// /validate endpoints of api_key_required.
func TestAPIKeyOpensNoAdminOrUserEndpoint(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "AK2", "alice", "pin")
	key := apiKey(t, e, time.Hour)
	// A validate-role token that also names the admin (signed with our
	// key) is no better.
	named := sign(t, jwt.SigningMethodHS256, testKey, jwt.MapClaims{"role": "validate", "username": "admin", "realm": "", "exp": e.clk.now().Add(time.Hour).Unix()})
	for _, k := range []string{key, named} {
		for _, tc := range []struct {
			method, path, body, msg string
		}{
			{"GET", "/token/", "", errKeyUser},
			{"POST", "/token/init", form("type", "spass", "pin", "x"), errKeyUser},
			{"POST", "/token/disable/AK2", "", errKeyUser},
			{"GET", "/user/", "", errKeyUser},
			{"GET", "/audit/", "", errKeyUser},
			{"GET", "/policy/", "", errKeyAdmin},
			{"POST", "/policy/x", form("scope", "admin", "action", "*"), errKeyAdmin},
			{"GET", "/realm/", "", errKeyAdmin},
			{"POST", "/validate/triggerchallenge", form("user", "alice", "realm", "realm1"), errKeyAdmin},
			{"GET", "/token/challenges/", "", errKeyAdmin},
		} {
			for _, h := range []string{"Authorization", "PI-Authorization"} {
				ctype := ""
				if tc.body != "" {
					ctype = formType
				}
				r := e.do(t, tc.method, tc.path, ctype, tc.body, map[string]string{h: k})
				wantError(t, r, 401, 4306, tc.msg)
			}
		}
	}
	// Nothing changed: the token is active, no policy was made.
	if at(listOne(t, e, tok, "AK2"), "active") != true {
		t.Error("the token was disabled with an API key")
	}
	if n := len(wantOK(t, e.admin(t, tok, "GET", "/policy/", "")).(map[string]any)); n != 0 {
		t.Errorf("%d policies after API key calls", n)
	}
}

func TestAPIKeyValidity(t *testing.T) {
	for _, tc := range []struct {
		days int
		ok   bool
	}{{0, false}, {-1, false}, {1, true}, {365, true}, {server.MaxAPIKeyDays, true}, {server.MaxAPIKeyDays + 1, false}} {
		d, err := server.APIKeyValidity(tc.days)
		if (err == nil) != tc.ok || (tc.ok && d != time.Duration(tc.days)*24*time.Hour) {
			t.Errorf("APIKeyValidity(%d) = %v, %v", tc.days, d, err)
		}
	}
	e := newEnv(t)
	if _, _, err := server.NewAPIKey(e.s, 0); err == nil {
		t.Error("NewAPIKey with no validity")
	}
	k := apiKey(t, e, time.Hour)
	var c jwt.MapClaims
	if _, err := jwt.ParseWithClaims(k, &c, func(*jwt.Token) (any, error) { return testKey, nil }, jwt.WithTimeFunc(e.clk.now)); err != nil {
		t.Fatal(err)
	}
	if c["role"] != "validate" || c["nonce"] == "" || c["exp"] != float64(e.clk.now().Add(time.Hour).Unix()) {
		t.Errorf("claims %v", c)
	}
}
