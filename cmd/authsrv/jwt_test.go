package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
)

var rotatedRe = regexp.MustCompile(`^new JWT key ([0-9a-f]{16}) signs from now on\n`)

// kidOf is a token's kid header.
func kidOf(t *testing.T, raw string) string {
	t.Helper()
	tok, _, err := jwt.NewParser().ParseUnverified(raw, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := tok.Header["kid"].(string)
	return kid
}

// rotate runs "jwt rotate" and returns the new key's id.
func rotate(t *testing.T, env map[string]string) string {
	t.Helper()
	code, out, errs := cli(t, env, "", "jwt", "rotate")
	m := rotatedRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("jwt rotate: %d %q %q", code, out, errs)
	}
	return m[1]
}

// call sends method path with tok to do and returns the status and body.
func call(t *testing.T, do func(*http.Request) *http.Response, method, path, tok string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if tok != "" {
		req.Header.Set("Authorization", tok)
	}
	resp := do(req)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tokenFrom logs name in through do and returns its JWT.
func tokenFrom(t *testing.T, do func(*http.Request) *http.Response, name, pw string) string {
	t.Helper()
	st, body := call(t, do, "POST", "/auth", "", url.Values{"username": {name}, "password": {pw}})
	var auth struct {
		Result struct {
			Value struct {
				Token string `json:"token"`
			} `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &auth); err != nil || st != 200 || auth.Result.Value.Token == "" {
		t.Fatalf("login %s: %d %s", name, st, body)
	}
	return auth.Result.Value.Token
}

// TestJWTRotateStopped: with no server running, "jwt rotate" writes the
// data directory's ring; the next server verifies a token issued before
// and signs new ones with the new kid.
func TestJWTRotateStopped(t *testing.T) {
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}
	for _, args := range [][]string{{"jwt"}, {"jwt", "frobnicate"}, {"jwt", "rotate", "extra"}} {
		if code, out, _ := cli(t, env, "", args...); code == 0 || strings.Contains(out, "new JWT key") {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
	if code, _, errs := cli(t, env, "", "jwt", "rotate"); code != 1 || !strings.Contains(errs, dir+" does not exist") {
		t.Errorf("rotate without a data directory: %d %q", code, errs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("rotate made a data directory: %v", err)
	}
	mkdirData(t, dir)
	if code, _, errs := cli(t, env, "", "jwt", "rotate"); code != 1 || !strings.Contains(errs, "no JWT key") {
		t.Errorf("rotate in an empty data directory: %d %q", code, errs)
	}
	if code, _, errs := cli(t, env, "pw-one\n", "admin", "add", "alice"); code != 0 {
		t.Fatalf("admin add: %d %s", code, errs)
	}
	serveOnce := func(f func(do func(*http.Request) *http.Response)) {
		s, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithLogger(zerolog.Nop()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		h := server.New(s)
		f(func(r *http.Request) *http.Response {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec.Result()
		})
	}
	var before, oldKID string
	serveOnce(func(do func(*http.Request) *http.Response) {
		before = tokenFrom(t, do, "alice", "pw-one")
		oldKID = kidOf(t, before)
	})
	code, out, errs := cli(t, env, "", "jwt", "rotate")
	m := rotatedRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("jwt rotate: %d %q %q", code, out, errs)
	}
	kid := m[1]
	if kid == oldKID {
		t.Fatalf("rotation kept the key id %s", kid)
	}
	// The first key was the jwtkey file's: API keys from before the ring
	// carry no kid and lose their key with it.
	if !strings.Contains(errs, "tokens without a key id") || !strings.Contains(errs, oldKID) {
		t.Errorf("no warning about kid-less tokens: %q", errs)
	}
	code, out, _ = cli(t, env, "", "jwt", "list")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, oldKID+"\t") || !strings.Contains(out, kid+"\t") ||
		!strings.Contains(out, "verifies until") {
		t.Errorf("jwt list: %d %q", code, out)
	}
	serveOnce(func(do func(*http.Request) *http.Response) {
		if st, body := call(t, do, "GET", "/policy/", before, nil); st != 200 {
			t.Errorf("token issued before the rotation: %d %s", st, body)
		}
		after := tokenFrom(t, do, "alice", "pw-one")
		if got := kidOf(t, after); got != kid {
			t.Errorf("token issued after the rotation has kid %q, want %q", got, kid)
		}
		if st, body := call(t, do, "GET", "/policy/", after, nil); st != 200 {
			t.Errorf("token issued after the rotation: %d %s", st, body)
		}
	})
}

// TestJWTRotateWhileServing: with the server running, "jwt rotate" goes
// through the control socket and the server signs with the new key at
// once while the token from before keeps working; "admin disable" and
// "admin delete" end an administrator's token on its next request.
func TestJWTRotateWhileServing(t *testing.T) {
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "warn"}
	addr, pw, _ := serveInProcess(t, env)
	do := func(r *http.Request) *http.Response {
		r.URL.Scheme, r.URL.Host, r.RequestURI = "http", addr, ""
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	before := adminToken(t, addr, pw)
	kid := rotate(t, env)
	if kid == kidOf(t, before) {
		t.Fatalf("rotation kept the key id %s", kid)
	}
	if st, body := call(t, do, "GET", "/policy/", before, nil); st != 200 {
		t.Errorf("token issued before the rotation: %d %s", st, body)
	}
	after := adminToken(t, addr, pw)
	if got := kidOf(t, after); got != kid {
		t.Errorf("token issued after the rotation has kid %q, want %q", got, kid)
	}
	if st, body := call(t, do, "GET", "/policy/", after, nil); st != 200 {
		t.Errorf("token issued after the rotation: %d %s", st, body)
	}
	if code, list, _ := cli(t, env, "", "jwt", "list"); code != 0 || strings.Count(list, "\n") != 2 || !strings.Contains(list, kid+"\t") {
		t.Errorf("jwt list through the socket: %d %q", code, list)
	}

	// An administrator disabled, enabled and deleted through the socket.
	if code, _, errs := cli(t, env, "bob-pw\n", "admin", "add", "bob"); code != 0 {
		t.Fatalf("admin add: %d %s", code, errs)
	}
	bob := tokenFrom(t, do, "bob", "bob-pw")
	if code, _, errs := cli(t, env, "", "admin", "disable", "bob"); code != 0 {
		t.Fatalf("admin disable: %d %s", code, errs)
	}
	if st, body := call(t, do, "GET", "/policy/", bob, nil); st != 401 || !strings.Contains(body, "4304") {
		t.Errorf("disabled admin's token: %d %s", st, body)
	}
	if st, _ := call(t, do, "POST", "/auth", "", url.Values{"username": {"bob"}, "password": {"bob-pw"}}); st != 401 {
		t.Errorf("disabled admin's login: %d", st)
	}
	if code, list, _ := cli(t, env, "", "admin", "list"); code != 0 || !strings.Contains(list, "bob\t") || !strings.Contains(list, "\tdisabled\n") {
		t.Errorf("admin list: %d %q", code, list)
	}
	if code, _, errs := cli(t, env, "", "admin", "enable", "bob"); code != 0 {
		t.Fatalf("admin enable: %d %s", code, errs)
	}
	if st, _ := call(t, do, "GET", "/policy/", bob, nil); st != 401 {
		t.Errorf("a token from before the disabling works after enabling: %d", st)
	}
	bob = tokenFrom(t, do, "bob", "bob-pw")
	if code, _, errs := cli(t, env, "", "admin", "delete", "bob"); code != 0 {
		t.Fatalf("admin delete: %d %s", code, errs)
	}
	if st, body := call(t, do, "GET", "/policy/", bob, nil); st != 401 || !strings.Contains(body, "4304") {
		t.Errorf("deleted admin's token: %d %s", st, body)
	}
	if st, body := call(t, do, "GET", "/policy/", after, nil); st != 200 {
		t.Errorf("the other admin's token: %d %s", st, body)
	}

	// A leaked key: -drop-old refuses every token signed before at once.
	code, rotated, _ := cli(t, env, "", "jwt", "rotate", "-drop-old")
	m := rotatedRe.FindStringSubmatch(rotated)
	if code != 0 || m == nil || strings.Count(rotated, "\n") != 2 {
		t.Fatalf("jwt rotate -drop-old: %d %q", code, rotated)
	}
	for name, tok := range map[string]string{"first key's": before, "second key's": after} {
		if st, body := call(t, do, "GET", "/policy/", tok, nil); st != 401 || !strings.Contains(body, "key id is unknown") {
			t.Errorf("%s token after -drop-old: %d %s", name, st, body)
		}
	}
	if got := kidOf(t, adminToken(t, addr, pw)); got != m[1] {
		t.Errorf("login after -drop-old has kid %q, want %q", got, m[1])
	}
}
