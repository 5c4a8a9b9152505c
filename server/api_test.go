package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver/builtin"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/storetest"
)

var (
	testKey   = bytes.Repeat([]byte{0x42}, 32)
	otherKey  = bytes.Repeat([]byte{0x43}, 32)
	cheapKDF  = authsrv.KDFParams{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}
	testStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
)

const adminPass = "S3cret-admin-pass"

// clock is an adjustable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type env struct {
	s   *authsrv.Server
	h   http.Handler
	clk *clock
	log *syncBuffer
}

func newEnv(t *testing.T, routes ...server.TestRoute) *env {
	t.Helper()
	return newEnvWith(t, nil, routes...)
}

// loopbackDial is the dial policy of the tests, whose SMTP, SMS, RADIUS
// and directory servers listen on loopback addresses; a test of the
// default policy passes its own WithDialPolicy, which comes later and wins.
var loopbackDial = netguard.MustParse("127.0.0.0/8", "::1/128")

func newEnvWith(t testing.TB, opts []authsrv.Option, routes ...server.TestRoute) *env {
	t.Helper()
	clk := &clock{t: testStart}
	logs := &syncBuffer{}
	s, err := authsrv.New(append([]authsrv.Option{
		authsrv.WithStore(storetest.Open(t)), authsrv.WithResolverTypes(builtin.Types()),
		authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey),
		authsrv.WithKDFParams(cheapKDF),
		authsrv.WithClock(clk.now),
		authsrv.WithLogger(zerolog.New(logs).Level(zerolog.DebugLevel)),
		authsrv.WithDialPolicy(loopbackDial),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Admins().Add(t.Context(), "admin", adminPass); err != nil {
		t.Fatal(err)
	}
	return &env{s: s, h: server.NewWithTestRoutes(s, routes...), clk: clk, log: logs}
}

type reply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

// do sends one request. body is sent as is with contentType.
func (e *env) do(t *testing.T, method, target, contentType, body string, hdr map[string]string) reply {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	r := reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	if len(r.body) > 0 && strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(r.body, &r.json); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, target, err, r.body)
		}
	}
	return r
}

func form(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}

const formType = "application/x-www-form-urlencoded"

// at walks a decoded JSON value along a dotted path.
func at(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// nullsByDesign are the paths where privacyIDEA sends null and no client
// of spec/real-clients.md reads the key with a typed getter: the paging
// keys of lists, the serial of /token/getserial without a match, a realm
// resolver's unset priority, a RADIUS server's unset options and the
// "state" attribute of the first e-mail or SMS challenge of a transaction.
var nullsByDesign = regexp.MustCompile(`^\$\.result\.value\.(prev|next|serial)$|^\$\.result\.value\.[^.]+\.resolver\[\d+\]\.priority$|^\$\.result\.value\[\d+\]\.options$|^\$\.detail\.(multi_challenge\[\d+\]\.)?attributes\.state$`)

// noNulls fails on any JSON null in the body (the PAM client aborts on one)
// but those privacyIDEA sends by design, and the detail of an error
// envelope (privacyIDEA's "detail": null beside result.error).
func noNulls(t *testing.T, v any, path string) {
	t.Helper()
	switch x := v.(type) {
	case nil:
		if !nullsByDesign.MatchString(path) {
			t.Errorf("JSON null at %s", path)
		}
	case map[string]any:
		for k, c := range x {
			if path == "$" && k == "detail" && c == nil && at(x, "result.status") == false {
				continue
			}
			noNulls(t, c, path+"."+k)
		}
	case []any:
		for i, c := range x {
			noNulls(t, c, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// wantError checks an error envelope.
func wantError(t *testing.T, r reply, status, code int, message string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d (%s)", r.status, status, r.body)
	}
	if got := at(r.json, "result.status"); got != false {
		t.Errorf("result.status = %v", got)
	}
	if got := at(r.json, "result.error.code"); got != float64(code) {
		t.Errorf("error.code = %v, want %d", got, code)
	}
	if got, _ := at(r.json, "result.error.message").(string); got != message {
		t.Errorf("error.message = %q, want %q", got, message)
	}
	if r.json["jsonrpc"] != "2.0" || r.json["id"] != float64(1) {
		t.Errorf("envelope head %v %v", r.json["jsonrpc"], r.json["id"])
	}
	if _, ok := r.json["versionnumber"]; ok {
		t.Error("error envelopes carry no versionnumber")
	}
	if d, ok := r.json["detail"]; !ok {
		t.Error("error envelope without detail (privacyIDEA sends null)")
	} else if _, isMap := d.(map[string]any); d != nil && !isMap {
		t.Errorf("error detail %v, want null or an object", d)
	}
	noNulls(t, r.json, "$")
}

func (e *env) login(t *testing.T) string {
	t.Helper()
	r := e.do(t, "POST", "/auth", formType, form("username", "admin", "password", adminPass), nil)
	tok, _ := at(r.json, "result.value.token").(string)
	if r.status != 200 || tok == "" {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	return tok
}

func TestHealth(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		path   string
		status int
		body   string
	}{
		{"/healthz/livez", 200, `{"status":"OK"}`},
		{"/healthz/livez/", 200, `{"status":"OK"}`},
		{"/healthz/startupz", 200, `{"status":"started"}`},
		{"/healthz/readyz", 200, `{"hsm":"OK","status":"ready"}`},
		{"/healthz/", 200, `{"hsm":"OK","status":"ready"}`},
		{"/healthz", 200, `{"hsm":"OK","status":"ready"}`},
	}
	check := func(t *testing.T, path string, status int, body string) {
		t.Helper()
		r := e.do(t, "GET", path, "", "", nil)
		if r.status != status || strings.TrimSpace(string(r.body)) != body {
			t.Errorf("GET %s = %d %s, want %d %s", path, r.status, r.body, status, body)
		}
		if r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-cache" {
			t.Errorf("headers %v", r.header)
		}
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) { check(t, tc.path, tc.status, tc.body) })
	}
	t.Run("after close", func(t *testing.T) {
		_ = e.s.Close()
		check(t, "/healthz/livez", 200, `{"status":"OK"}`)
		check(t, "/healthz/startupz", 503, `{"status":"not started"}`)
		check(t, "/healthz/readyz", 503, `{"hsm":"unchecked","status":"not ready"}`)
		check(t, "/healthz/", 503, `{"hsm":"unchecked","status":"not ready"}`)
	})
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	t.Run("form login", func(t *testing.T) {
		r := e.do(t, "POST", "/auth", formType, form("username", "admin", "password", adminPass), nil)
		if r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		noNulls(t, r.json, "$")
		if r.json["id"] != float64(2) || at(r.json, "result.authentication") != "ACCEPT" || at(r.json, "result.status") != true {
			t.Errorf("envelope %s", r.body)
		}
		if r.json["version"] != "authsrv "+authsrv.Version || r.json["versionnumber"] != authsrv.Version {
			t.Errorf("version %v %v", r.json["version"], r.json["versionnumber"])
		}
		if tm, _ := r.json["time"].(float64); int64(tm) != testStart.Unix() {
			t.Errorf("time %v", r.json["time"])
		}
		v := at(r.json, "result.value").(map[string]any)
		if v["role"] != "admin" || v["username"] != "admin" || v["realm"] != "" || v["auth"] != true {
			t.Errorf("value %v", v)
		}
		if _, ok := v["rights"].([]any); !ok {
			t.Errorf("rights %v", v["rights"])
		}
		var c jwt.MapClaims
		tok, err := jwt.ParseWithClaims(v["token"].(string), &c, func(*jwt.Token) (any, error) { return testKey, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithTimeFunc(e.clk.now))
		if err != nil || !tok.Valid {
			t.Fatalf("token: %v", err)
		}
		if c["username"] != "admin" || c["role"] != "admin" || c["realm"] != "" || c["authtype"] != "password" {
			t.Errorf("claims %v", c)
		}
		if n, _ := c["nonce"].(string); len(n) != 32 {
			t.Errorf("nonce %v", c["nonce"])
		}
		if exp, _ := c["exp"].(float64); int64(exp) != testStart.Add(time.Hour).Unix() {
			t.Errorf("exp %v, want now+3600", c["exp"])
		}
		if _, ok := c["iat"]; ok {
			t.Error("privacyIDEA's tokens carry no iat")
		}
	})
	t.Run("json login", func(t *testing.T) {
		r := e.do(t, "POST", "/auth/", "application/json", `{"username":"admin","password":"`+adminPass+`"}`, nil)
		if r.status != 200 || at(r.json, "result.value.token") == nil {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	bad := []struct {
		name        string
		ctype, body string
		status      int
		code        int
		msg         string
	}{
		{"wrong password", formType, form("username", "admin", "password", "nope"), 401, 4031, "ERR4031: Authentication failure. Wrong credentials"},
		{"unknown user", formType, form("username", "ghost", "password", adminPass), 401, 4031, "ERR4031: Authentication failure. Wrong credentials"},
		{"empty password", formType, form("username", "admin", "password", ""), 401, 4031, "ERR4031: Authentication failure. Wrong credentials"},
		{"no username", formType, form("password", adminPass), 401, 4032, "ERR4032: Authentication failure. Missing Username"},
		{"unknown realm", formType, form("username", "admin", "password", adminPass, "realm", "nowhere"), 401, 4031, "ERR4031: Authentication failure. Unknown realm: nowhere."},
		{"password as number", "application/json", `{"username":"admin","password":12345}`, 401, 4031, "ERR4031: Authentication failure. Wrong credentials"},
		{"password as object", "application/json", `{"username":"admin","password":{"a":1}}`, 400, 905, ""},
		{"not an object", "application/json", `["admin"]`, 400, 905, ""},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", "/auth", tc.ctype, tc.body, nil)
			msg := tc.msg
			if msg == "" {
				msg, _ = at(r.json, "result.error.message").(string)
				if !strings.HasPrefix(msg, "ERR905: ") {
					t.Errorf("message %q", msg)
				}
			}
			wantError(t, r, tc.status, tc.code, msg)
		})
	}
	t.Run("GET is not allowed", func(t *testing.T) {
		r := e.do(t, "GET", "/auth", "", "", nil)
		if r.status != 405 || at(r.json, "result.status") != false {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
}

// sign makes a token with arbitrary claims, method and key.
func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenChecks(t *testing.T) {
	probe := server.TestRoute{Method: "GET", Path: "/probe/admin", Access: "admin", Action: "probe",
		Fn: func(ctx context.Context, p *server.Params) (any, map[string]any, error) { return true, nil, nil }}
	anyRole := server.TestRoute{Method: "GET", Path: "/probe/any", Access: "any",
		Fn: func(ctx context.Context, p *server.Params) (any, map[string]any, error) { return "hi", nil, nil }}
	e := newEnv(t, probe, anyRole)
	good := e.login(t)
	userTok, err := server.IssueToken(e.s, "alice", "realm1", "user")
	if err != nil {
		t.Fatal(err)
	}
	exp := testStart.Add(time.Hour).Unix()
	base := jwt.MapClaims{"username": "admin", "realm": "", "role": "admin", "nonce": "x", "authtype": "password", "exp": exp}
	noExp := jwt.MapClaims{"username": "admin", "role": "admin"}
	badRole := jwt.MapClaims{"username": "admin", "role": "root", "exp": exp}
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + strings.TrimRight(jsonB64(`{"username":"root","role":"admin","exp":9999999999}`), "=") + "." + parts[2]
	noneTok := strings.TrimRight(jsonB64(`{"alg":"none","typ":"JWT"}`), "=") + "." + strings.TrimRight(jsonB64(`{"username":"admin","role":"admin","exp":9999999999}`), "=") + "."

	decode := func(reason string) string {
		return "ERR4304: Authentication failure. Error decoding the Authorization token: " + reason
	}
	cases := []struct {
		name   string
		path   string
		hdr    map[string]string
		status int
		code   int
		msg    string
	}{
		{"raw in Authorization", "/probe/admin", map[string]string{"Authorization": good}, 200, 0, ""},
		{"raw in PI-Authorization", "/probe/admin", map[string]string{"PI-Authorization": good}, 200, 0, ""},
		{"Bearer prefix tolerated", "/probe/admin", map[string]string{"Authorization": "Bearer " + good}, 200, 0, ""},
		{"PI-Authorization wins", "/probe/admin", map[string]string{"PI-Authorization": good, "Authorization": "garbage"}, 200, 0, ""},
		{"slash form", "/probe/admin/", map[string]string{"Authorization": good}, 200, 0, ""},
		{"no header", "/probe/admin", nil, 401, 4033, "ERR4033: Authentication failure. Missing Authorization header."},
		{"empty header", "/probe/admin", map[string]string{"Authorization": "  "}, 401, 4033, "ERR4033: Authentication failure. Missing Authorization header."},
		{"garbage", "/probe/admin", map[string]string{"Authorization": "not-a-jwt"}, 401, 4304, decode("Invalid token")},
		{"tampered payload", "/probe/admin", map[string]string{"Authorization": tampered}, 401, 4304, decode("Signature verification failed")},
		{"other key", "/probe/admin", map[string]string{"Authorization": sign(t, jwt.SigningMethodHS256, otherKey, base)}, 401, 4304, decode("Signature verification failed")},
		{"HS512 with our key", "/probe/admin", map[string]string{"Authorization": sign(t, jwt.SigningMethodHS512, testKey, base)}, 401, 4304, decode("The specified alg value is not allowed")},
		{"alg none", "/probe/admin", map[string]string{"Authorization": noneTok}, 401, 4304, decode("The specified alg value is not allowed")},
		{"no exp", "/probe/admin", map[string]string{"Authorization": sign(t, jwt.SigningMethodHS256, testKey, noExp)}, 401, 4304, decode(`Token is missing the "exp" claim`)},
		{"unknown role", "/probe/admin", map[string]string{"Authorization": sign(t, jwt.SigningMethodHS256, testKey, badRole)}, 401, 4304, decode("Invalid token")},
		{"huge header", "/probe/admin", map[string]string{"Authorization": strings.Repeat("a", 100<<10)}, 401, 4304, decode("the token is too long")},
		{"user role on admin endpoint", "/probe/admin", map[string]string{"Authorization": userTok}, 401, 4306, "ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!"},
		{"user role on any-role endpoint", "/probe/any", map[string]string{"Authorization": userTok}, 200, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "GET", tc.path, "", "", tc.hdr)
			if tc.status == 200 {
				if r.status != 200 || at(r.json, "result.status") != true {
					t.Fatalf("%d %s", r.status, r.body)
				}
				noNulls(t, r.json, "$")
				return
			}
			wantError(t, r, tc.status, tc.code, tc.msg)
		})
	}
	t.Run("expired", func(t *testing.T) {
		e.clk.add(time.Hour + time.Second)
		defer e.clk.add(-time.Hour - time.Second)
		r := e.do(t, "GET", "/probe/admin", "", "", map[string]string{"Authorization": good})
		wantError(t, r, 401, 4305, "ERR4305: Authentication failure. Your token has expired: Signature has expired")
	})
	t.Run("valid until the last second", func(t *testing.T) {
		e.clk.add(time.Hour - time.Second)
		defer e.clk.add(-time.Hour + time.Second)
		if r := e.do(t, "GET", "/probe/admin", "", "", map[string]string{"Authorization": good}); r.status != 200 {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
}

func jsonB64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestEnvelopeAndErrors(t *testing.T) {
	routes := []server.TestRoute{
		{Method: "GET", Path: "/t/value", Access: "public", Fn: func(context.Context, *server.Params) (any, map[string]any, error) {
			return false, nil, nil
		}},
		{Method: "GET", Path: "/t/detail", Access: "public", Auth: true, Fn: func(context.Context, *server.Params) (any, map[string]any, error) {
			return false, map[string]any{"message": "wrong otp value", "serial": "S1"}, nil
		}},
		{Method: "GET", Path: "/t/challenge", Access: "public", Auth: true, Fn: func(context.Context, *server.Params) (any, map[string]any, error) {
			return false, map[string]any{"multi_challenge": []any{map[string]any{"serial": "S1"}}}, nil
		}},
		{Method: "GET", Path: "/t/internal", Access: "public", Fn: func(context.Context, *server.Params) (any, map[string]any, error) {
			return nil, nil, errors.New("disk on fire at /var/secret/path")
		}},
		{Method: "GET", Path: "/t/coded", Access: "public", Fn: func(context.Context, *server.Params) (any, map[string]any, error) {
			return nil, nil, fmt.Errorf("wrapped: %w", apierr.New(apierr.ResourceNotFound, "The requested Policy could not be found.").WithNumber(601))
		}},
		{Method: "GET", Path: "/t/panic", Access: "public", Fn: func(context.Context, *server.Params) (any, map[string]any, error) {
			panic("boom with internal detail")
		}},
	}
	e := newEnv(t, routes...)
	t.Run("false value is kept, detail omitted", func(t *testing.T) {
		r := e.do(t, "GET", "/t/value", "", "", nil)
		if v, ok := at(r.json, "result").(map[string]any)["value"]; !ok || v != false {
			t.Errorf("value %v (present %v)", v, ok)
		}
		if _, ok := r.json["detail"]; ok {
			t.Error("detail present without details")
		}
		if r.json["id"] != float64(1) {
			t.Errorf("id %v", r.json["id"])
		}
		if _, ok := at(r.json, "result").(map[string]any)["authentication"]; ok {
			t.Error("authentication on an id-1 answer")
		}
	})
	t.Run("auth endpoint: id 2, REJECT, threadid", func(t *testing.T) {
		r := e.do(t, "GET", "/t/detail", "", "", nil)
		if r.json["id"] != float64(2) || at(r.json, "result.authentication") != "REJECT" {
			t.Errorf("%s", r.body)
		}
		if _, ok := at(r.json, "detail.threadid").(float64); !ok || at(r.json, "detail.message") != "wrong otp value" {
			t.Errorf("detail %v", r.json["detail"])
		}
	})
	t.Run("challenge", func(t *testing.T) {
		r := e.do(t, "GET", "/t/challenge", "", "", nil)
		if at(r.json, "result.authentication") != "CHALLENGE" {
			t.Errorf("%s", r.body)
		}
	})
	t.Run("internal error is generic", func(t *testing.T) {
		r := e.do(t, "GET", "/t/internal", "", "", nil)
		wantError(t, r, 500, 903, "ERR903: Internal server error.")
		if bytes.Contains(r.body, []byte("fire")) {
			t.Error("cause leaked to the client")
		}
		if !strings.Contains(e.log.String(), "disk on fire") || !strings.Contains(e.log.String(), `"request_id"`) {
			t.Error("cause not logged with the request id")
		}
	})
	t.Run("coded error keeps its number through wrapping", func(t *testing.T) {
		wantError(t, e.do(t, "GET", "/t/coded", "", "", nil), 404, 601, "ERR601: The requested Policy could not be found.")
	})
	t.Run("panic becomes a generic error", func(t *testing.T) {
		r := e.do(t, "GET", "/t/panic", "", "", nil)
		wantError(t, r, 500, 903, "ERR903: Internal server error.")
		if bytes.Contains(r.body, []byte("boom")) {
			t.Error("panic text leaked")
		}
		if !strings.Contains(e.log.String(), "boom with internal detail") {
			t.Error("panic not logged")
		}
	})
	t.Run("unknown path", func(t *testing.T) {
		r := e.do(t, "GET", "/no/such/path", "", "", nil)
		wantError(t, r, 404, 601, "ERR601: The requested URL was not found on the server.")
	})
	t.Run("wrong method", func(t *testing.T) {
		r := e.do(t, "DELETE", "/healthz/livez", "", "", nil)
		wantError(t, r, 405, 905, "ERR905: The method DELETE is not allowed for this path.")
	})
	t.Run("request id header", func(t *testing.T) {
		r := e.do(t, "GET", "/t/value", "", "", nil)
		if r.header.Get("Request-Id") == "" {
			t.Error("no Request-Id header")
		}
	})
}

func TestRoutesBuildAndAnswer(t *testing.T) {
	e := newEnv(t)
	routes := server.Routes(e.s)
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	for _, r := range routes {
		for _, p := range []string{r.Path, toggleSlash(r.Path)} {
			rep := e.do(t, r.Method, p, "", "", nil)
			if rep.status == 404 || rep.status == 405 || rep.status == 301 {
				t.Errorf("%s %s answered %d", r.Method, p, rep.status)
			}
		}
		switch r.Access {
		case "public":
			if !publicByDesign[r.Method+" "+r.Path] {
				t.Errorf("%s %s is public but not listed as public by design", r.Method, r.Path)
			}
		case "admin":
			if _, inner := innerChecks[r.Method+" "+r.Path]; r.Action == "" && !adminByRole[r.Method+" "+r.Path] && !inner {
				t.Errorf("%s %s is admin-only without an action for the rights check", r.Method, r.Path)
			}
		}
	}
}

// publicByDesign lists the routes that need no token.
var publicByDesign = map[string]bool{
	"GET /healthz/":           true,
	"GET /healthz/livez":      true,
	"GET /healthz/startupz":   true,
	"GET /healthz/readyz":     true,
	"POST /auth":              true,
	"GET /healthz/resolversz": true,
	// Authentication requests of clients (VPN, PAM, RADIUS, SAML).
	"GET /validate/check":                           true,
	"POST /validate/check":                          true,
	"GET /validate/samlcheck":                       true,
	"POST /validate/samlcheck":                      true,
	"GET /validate/radiuscheck":                     true,
	"POST /validate/radiuscheck":                    true,
	"GET /validate/polltransaction":                 true,
	"GET /validate/polltransaction/:transaction_id": true,
	"POST /validate/offlinerefill":                  true,
}

// adminByRole lists the admin endpoints that privacyIDEA guards by the
// admin role alone, without an action.
var adminByRole = map[string]bool{
	"GET /realm/":                         true,
	"GET /realm/superuser":                true,
	"GET /defaultrealm":                   true,
	"GET /resolver/:resolvername/default": true,
	"GET /application/":                   true,
}

func toggleSlash(p string) string {
	if strings.HasSuffix(p, "/") {
		return strings.TrimSuffix(p, "/")
	}
	return p + "/"
}

// TestNoSecretsInLogs: passwords and tokens never reach the log, whatever
// the transport (shared/spec reliability S1 for the endpoints that exist).
func TestNoSecretsInLogs(t *testing.T) {
	probe := server.TestRoute{Method: "POST", Path: "/probe", Access: "admin", Action: "probe",
		Fn: func(ctx context.Context, p *server.Params) (any, map[string]any, error) {
			zerolog.Ctx(ctx).Debug().Stringer("params", p).Msg("handler saw params")
			return true, nil, nil
		}}
	e := newEnv(t, probe)
	tok := e.login(t)
	secretPw := "Unique-Pw-7f3a9"
	e.do(t, "POST", "/auth", formType, form("username", "admin", "password", secretPw), nil)
	e.do(t, "POST", "/auth", "application/json", `{"username":"admin","password":"`+secretPw+`"}`, nil)
	e.do(t, "POST", "/auth?username=admin&password="+secretPw, "", "", nil)
	e.do(t, "POST", "/probe?password="+secretPw, formType, form("pass", secretPw), map[string]string{"Authorization": tok})
	e.do(t, "POST", "/probe", formType, "", map[string]string{"PI-Authorization": tok})
	logs := e.log.String()
	if !strings.Contains(logs, `"path":"/auth"`) || !strings.Contains(logs, "handler saw params") {
		t.Fatalf("the access log did not record the requests:\n%s", logs)
	}
	for _, s := range []string{secretPw, adminPass, tok, strings.Split(tok, ".")[2]} {
		if strings.Contains(logs, s) {
			t.Errorf("secret %q found in the log", s)
		}
	}
	if regexp.MustCompile(`eyJ[\w-]+\.eyJ[\w-]+`).MatchString(logs) {
		t.Error("a JWT-shaped string is in the log")
	}
}

// FuzzEnvelope: whatever strings a handler returns, the answer is a JSON
// envelope without nulls.
func FuzzEnvelope(f *testing.F) {
	f.Add("value", "message", "key", true)
	f.Add("", "", "", false)
	f.Add("\x00\xff<script>", "\u2028", "multi_challenge", true)
	f.Add("CHALLENGE", "declined", "challenge_status", true)
	f.Fuzz(func(t *testing.T, value, dv, dk string, auth bool) {
		route := server.TestRoute{Method: "GET", Path: "/f", Access: "public", Auth: auth,
			Fn: func(context.Context, *server.Params) (any, map[string]any, error) {
				return value, map[string]any{dk: dv}, nil
			}}
		e := fuzzEnv(t, route)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", "/f", nil))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		noNulls(t, out, "$")
		if at(out, "result.status") != true {
			t.Fatalf("status %v", at(out, "result.status"))
		}
	})
}

func fuzzEnv(t *testing.T, route server.TestRoute) http.Handler {
	s, err := authsrv.New(authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return server.NewWithTestRoutes(s, route)
}
