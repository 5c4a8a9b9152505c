package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/server"
)

var jwtRe = regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\n$`)

// createToken runs "api createtoken" and returns the key it printed.
func createToken(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	code, out, errs := cli(t, env, "", append([]string{"api", "createtoken"}, args...)...)
	if code != 0 || !jwtRe.MatchString(out) || !strings.Contains(errs, "valid until") {
		t.Fatalf("api createtoken %v: %d %q %q", args, code, out, errs)
	}
	key := strings.TrimSpace(out)
	if strings.Contains(errs, key) {
		t.Error("the key was written to standard error")
	}
	return key
}

// checkStatus posts /validate/check for an unknown serial through h (or
// addr) with key, and returns the HTTP status and the error code: 404/601
// when the request got past api_key_required, 403/303 when it did not.
func checkStatus(t *testing.T, do func(*http.Request) *http.Response, key string) (int, float64) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "/validate/check", strings.NewReader(url.Values{"serial": {"NOPE"}, "pass": {"x"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Authorization", key)
	}
	resp := do(req)
	defer func() { _ = resp.Body.Close() }()
	var env struct {
		Result struct {
			Error struct {
				Code float64 `json:"code"`
			} `json:"error"`
		} `json:"result"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	return resp.StatusCode, env.Result.Error.Code
}

// TestAPIKeyCreateTokenDirect: with no server running, the command signs
// with the data directory's JWT key, and the server of that directory
// takes the key under api_key_required.
func TestAPIKeyCreateTokenDirect(t *testing.T) {
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}

	// No data directory yet: no key is made up.
	if code, _, errs := cli(t, env, "", "api", "createtoken"); code != 1 || !strings.Contains(errs, dir+" does not exist") {
		t.Fatalf("without a data directory: %d %q", code, errs)
	}
	// An empty one holds no JWT key either.
	mkdirData(t, dir)
	if code, _, errs := cli(t, env, "", "api", "createtoken"); code != 1 || !strings.Contains(errs, "no JWT key") {
		t.Fatalf("in an empty data directory: %d %q", code, errs)
	}
	for _, args := range [][]string{{"api"}, {"api", "createtoken", "extra"}, {"api", "frobnicate"}} {
		if code, out, _ := cli(t, env, "", args...); code == 0 || out != "" {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
	if code, _, _ := cli(t, nil, "", "help"); code != 0 {
		t.Error("help")
	}
	if _, out, _ := cli(t, nil, "", "help"); !strings.Contains(out, "api createtoken [-validity DAYS]") {
		t.Errorf("usage does not list the command: %q", out)
	}
	// Make the data directory.
	if code, _, errs := cli(t, env, "pw-one\n", "admin", "add", "alice"); code != 0 {
		t.Fatalf("admin add: %d %s", code, errs)
	}
	for _, v := range []string{"0", "-3", "36501", "soon"} {
		if code, out, errs := cli(t, env, "", "api", "createtoken", "-validity", v); code == 0 || out != "" {
			t.Errorf("-validity %s: %d %q %q", v, code, out, errs)
		}
	}
	before := time.Now()
	key := createToken(t, env, "-validity", "2")
	def := createToken(t, env) // the default validity: 365 days
	if key == def {
		t.Error("two keys are the same")
	}

	s, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	for k, days := range map[string]int{key: 2, def: 365} {
		var c jwt.MapClaims
		if err := s.ParseJWT(k, &c); err != nil {
			t.Fatalf("the key does not verify with the data directory's JWT key: %v", err)
		}
		exp, _ := c.GetExpirationTime()
		want := before.Add(time.Duration(days) * 24 * time.Hour)
		if c["role"] != "validate" || exp == nil || exp.Before(want.Add(-time.Second)) || exp.After(want.Add(time.Minute)) {
			t.Errorf("claims %v, want role validate and expiry about %v", c, want)
		}
	}

	h := server.New(s)
	do := func(r *http.Request) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Result()
	}
	if _, err := s.Policies().Set(t.Context(), policy.Policy{Name: "apikey", Scope: policy.ScopeAuthorization, Action: "api_key_required", Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	if st, code := checkStatus(t, do, ""); st != 403 || code != 303 {
		t.Errorf("without a key: %d %v", st, code)
	}
	for _, k := range []string{key, def} {
		if st, code := checkStatus(t, do, k); st != 404 || code != 601 {
			t.Errorf("with the key: %d %v", st, code)
		}
	}
	// The key opens no admin endpoint.
	req := httptest.NewRequest("GET", "/policy/", nil)
	req.Header.Set("Authorization", key)
	if resp := do(req); resp.StatusCode != 401 {
		t.Errorf("GET /policy/ with an API key: %d", resp.StatusCode)
	}
}

// TestAPIKeyCreateTokenWhileServing: with the server running, the command
// gets the key through the control socket, and the running server takes it.
func TestAPIKeyCreateTokenWhileServing(t *testing.T) {
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "debug"}
	addr, pw, logs := serveInProcess(t, env)
	tok := adminToken(t, addr, pw)
	do := func(r *http.Request) *http.Response {
		r.URL.Scheme, r.URL.Host, r.RequestURI = "http", addr, ""
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "/policy/apikey", strings.NewReader(`{"scope":"authorization","action":"api_key_required","active":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", tok)
	if resp := do(req); resp.StatusCode != 200 {
		t.Fatalf("POST /policy/apikey: %d", resp.StatusCode)
	}

	key := createToken(t, env, "-validity", "1")
	if st, code := checkStatus(t, do, ""); st != 403 || code != 303 {
		t.Errorf("without a key: %d %v", st, code)
	}
	if st, code := checkStatus(t, do, key); st != 404 || code != 601 {
		t.Errorf("with the key: %d %v", st, code)
	}
	// A key of another data directory is no key here.
	other := mkdirData(t, shortDir(t))
	oenv := map[string]string{"AUTHSRV_DATA_DIR": other, "AUTHSRV_LOG_LEVEL": "disabled"}
	cli(t, oenv, "pw\n", "admin", "add", "x")
	if st, code := checkStatus(t, do, createToken(t, oenv)); st != 403 || code != 303 {
		t.Errorf("with a foreign key: %d %v", st, code)
	}
	if strings.Contains(logs.String(), key) {
		t.Error("the API key reached the server's log")
	}
}
