package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a hand-written stand-in for authsrv's admin API and
// /validate/check: it checks PIN + HOTP with a window of 10 from the
// next expected counter, as the real server does. It applies the second
// percent-decoding privacyIDEA applies to form values.
type fakeServer struct {
	t        *testing.T
	password string
	jwt      string

	mu       sync.Mutex
	passwd   map[string]bool // logins from the resolver's file
	realms   map[string]bool
	tokens   map[string]*fakeToken // by login
	checks   int
	dropNth  int    // with n > 0, every n-th check is cut off without an answer
	dropLate bool   // cut off after the check counted (else before)
	otppin   string // the otppin policy the setup set
	// maxFailSet counts /token/set calls (mode wrong raises max_failcount).
	maxFailSet int
}

type fakeToken struct {
	key     []byte
	pin     string
	counter uint64
}

func newFake(t *testing.T) *fakeServer {
	return &fakeServer{t: t, password: "adm%in pw", jwt: "eyJfake.jwt.value", passwd: map[string]bool{},
		realms: map[string]bool{}, tokens: map[string]*fakeToken{}}
}

func (f *fakeServer) start(t *testing.T) string {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func fakeReply(w http.ResponseWriter, status int, value any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status != http.StatusOK {
		_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"status": false,
			"error": map[string]any{"code": 905, "message": value}}})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"status": true, "value": value}})
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/healthz/livez" {
		_, _ = w.Write([]byte(`{"status":"OK"}`))
		return
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		fakeReply(w, 400, "bad request")
		return
	}
	p := func(k string) string {
		v, err := url.PathUnescape(r.PostForm.Get(k)) // the second decoding
		if err != nil {
			f.t.Errorf("%s: %s is not quoted for the second decoding", r.URL.Path, k)
		}
		return v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path != "/auth" && r.URL.Path != "/validate/check" && r.Header.Get("Authorization") != f.jwt {
		fakeReply(w, 401, "Authentication failure. Missing Authorization header.")
		return
	}
	switch {
	case r.URL.Path == "/auth":
		if p("username") != "admin" || p("password") != f.password {
			fakeReply(w, 401, "Authentication failure. Wrong credentials")
			return
		}
		fakeReply(w, 200, map[string]any{"token": f.jwt, "role": "admin"})
	case strings.HasPrefix(r.URL.Path, "/resolver/"):
		if p("type") != "passwdresolver" {
			fakeReply(w, 400, "type")
			return
		}
		file, err := os.Open(p("fileName"))
		if err != nil {
			fakeReply(w, 400, "The file does not exist.")
			return
		}
		defer file.Close()
		f.passwd = map[string]bool{}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			login, _, _ := strings.Cut(sc.Text(), ":")
			f.passwd[login] = true
		}
		fakeReply(w, 200, 1)
	case strings.HasPrefix(r.URL.Path, "/policy/"):
		if p("scope") != "authentication" || !f.realms[p("realm")] {
			fakeReply(w, 400, "bad policy")
			return
		}
		f.otppin = strings.TrimPrefix(p("action"), "otppin=")
		fakeReply(w, 200, map[string]any{"setPolicy " + strings.TrimPrefix(r.URL.Path, "/policy/"): 1})
	case strings.HasPrefix(r.URL.Path, "/realm/"):
		f.realms[strings.TrimPrefix(r.URL.Path, "/realm/")] = true
		fakeReply(w, 200, map[string]any{"added": []string{p("resolvers")}, "failed": []string{}})
	case r.URL.Path == "/token/init":
		key, err := hex.DecodeString(p("otpkey"))
		if err != nil || p("type") != "hotp" || !f.passwd[p("user")] || !f.realms[p("realm")] || p("serial") == "" {
			fakeReply(w, 400, "bad token init")
			return
		}
		// As the real server: re-enrolling keeps the PIN unless "pin"
		// is sent.
		tok := &fakeToken{key: key, pin: p("pin")}
		if old := f.tokens[p("user")]; old != nil && !r.PostForm.Has("pin") {
			tok.pin = old.pin
		}
		f.tokens[p("user")] = tok
		fakeReply(w, 200, true)
	case r.URL.Path == "/token/set":
		if n, err := strconv.Atoi(p("max_failcount")); err != nil || n < 1000 || p("serial") == "" {
			fakeReply(w, 400, "bad token set")
			return
		}
		f.maxFailSet++
		fakeReply(w, 200, 1)
	case r.URL.Path == "/validate/check":
		f.checks++
		drop := f.dropNth > 0 && f.checks%f.dropNth == 0
		if drop && !f.dropLate {
			f.cutOff(w)
			return
		}
		tok := f.tokens[p("user")]
		ok := false
		pinOK := func(pin string) bool {
			if f.otppin == "none" {
				return pin == ""
			}
			return pin == tok.pin
		}
		if pass := p("pass"); tok != nil && len(pass) >= 6 && pinOK(pass[:len(pass)-6]) {
			g := newHOTP(tok.key, 6)
			for c := tok.counter; c < tok.counter+10; c++ {
				if g.At(c) == pass[len(pass)-6:] {
					tok.counter, ok = c+1, true
					break
				}
			}
		}
		if drop {
			f.cutOff(w)
			return
		}
		fakeReply(w, 200, ok)
	default:
		fakeReply(w, 404, "not found")
	}
}

// cutOff closes the connection without an answer.
func (f *fakeServer) cutOff(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		f.t.Error(err)
		return
	}
	_ = conn.Close()
}

// runJSON runs the command with -json and returns the decoded summary,
// the exit code and everything printed.
func runJSON(t *testing.T, ctx context.Context, env map[string]string, args ...string) (summary, int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(ctx, append([]string{"-json"}, args...), &out, &errOut, func(k string) string { return env[k] })
	var s summary
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
		}
	}
	return s, code, out.String() + errOut.String()
}

func TestLoadAgainstFake(t *testing.T) {
	cases := []struct {
		name string
		mode string
		pin  string
	}{
		{"valid", modeValid, ""},
		{"pin", modePIN, "Pq%41z"}, // a '%' survives the server's second decoding
		{"wrong with PIN", modeWrong, "Wr0ngPIN"},
		{"wrong without PIN", modeWrong, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			base := f.start(t)
			env := map[string]string{envAdminPassword: f.password, envPIN: tc.pin}
			s, code, out := runJSON(t, t.Context(), env, "-url", base, "-users", "7", "-clients", "3",
				"-duration", "300ms", "-mode", tc.mode, "-passwd-dir", t.TempDir())
			if code != exitOK {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if s.Requests == 0 || s.Successes != s.Requests || s.Errors.Total != 0 || s.Clients != 3 || s.Users != 7 {
				t.Errorf("summary %+v", s)
			}
			if s.LatencyMS.Max <= 0 || s.LatencyMS.P50 > s.LatencyMS.P99 || s.RequestsPerSec <= 0 {
				t.Errorf("latency %+v, %v req/s", s.LatencyMS, s.RequestsPerSec)
			}
			for _, secret := range []string{f.password, f.jwt} {
				if strings.Contains(out, secret) {
					t.Errorf("output shows a secret %q:\n%s", secret, out)
				}
			}
			if tc.pin != "" && strings.Contains(out, tc.pin) {
				t.Errorf("output shows the PIN:\n%s", out)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			wantOTPPIN, wantMaxFail := "tokenpin", 0
			if tc.pin == "" {
				wantOTPPIN = "none"
			}
			if tc.mode == modeWrong {
				wantMaxFail = 7
			}
			if f.otppin != wantOTPPIN || f.maxFailSet != wantMaxFail {
				t.Errorf("setup: otppin %q, %d max_failcount raises; want %q, %d", f.otppin, f.maxFailSet, wantOTPPIN, wantMaxFail)
			}
		})
	}
}

// TestModeChangeResetsPIN: a setup for mode valid after one for mode pin
// re-enrols the same serials and must clear their PIN.
func TestModeChangeResetsPIN(t *testing.T) {
	f := newFake(t)
	base := f.start(t)
	for _, mode := range []string{modePIN, modeValid, modeWrong, modePIN} {
		env := map[string]string{envAdminPassword: f.password}
		if mode != modeValid {
			env[envPIN] = "Zx81"
		}
		s, code, out := runJSON(t, t.Context(), env, "-url", base, "-users", "3", "-clients", "2",
			"-duration", "100ms", "-mode", mode, "-passwd-dir", t.TempDir())
		if code != exitOK || s.Errors.Total != 0 || s.Successes == 0 {
			t.Fatalf("mode %s: exit %d %+v\n%s", mode, code, s, out)
		}
	}
}

// TestTransportErrorsKeepCountersInStep cuts off every 5th check, before
// or after the server used the OTP: the driver advances its counter in
// both cases and no later request fails.
func TestTransportErrorsKeepCountersInStep(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := "cut before the check"
		if late {
			name = "cut after the check"
		}
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			f.dropNth, f.dropLate = 5, late
			base := f.start(t)
			s, code, out := runJSON(t, t.Context(), map[string]string{envAdminPassword: f.password},
				"-url", base, "-users", "4", "-clients", "2", "-duration", "300ms", "-passwd-dir", t.TempDir())
			if code != exitFailed {
				t.Errorf("exit %d, want %d (there were errors)", code, exitFailed)
			}
			if s.Errors.Transport == 0 || s.Errors.Value != 0 || s.Errors.Status != 0 || s.Successes == 0 {
				t.Errorf("summary %+v\n%s", s, out)
			}
			if !strings.Contains(out, "transport: ") {
				t.Errorf("no transport error sample:\n%s", out)
			}
		})
	}
}

func TestSetupOnlyThenSkipSetup(t *testing.T) {
	f := newFake(t)
	base := f.start(t)
	state := filepath.Join(t.TempDir(), "state.json")
	env := map[string]string{envAdminPassword: f.password, envPIN: "777"}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"-url", base, "-users", "5", "-mode", "pin", "-setup-only", "-state", state,
		"-passwd-dir", t.TempDir(), "-prefix", "sk"}, &out, &errOut, func(k string) string { return env[k] })
	if code != exitOK || !strings.Contains(out.String(), "setup of 5 users") {
		t.Fatalf("setup-only: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	_, users, err := loadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String()+errOut.String(), hex.EncodeToString(users[0].Key)) {
		t.Error("the output shows a token key")
	}
	if len(f.tokens) != 5 {
		t.Fatalf("server has %d tokens", len(f.tokens))
	}

	// Two load runs from the state: the second starts where the first
	// stopped, so the counters were saved.
	var last int64
	for i := range 2 {
		s, code, out := runJSON(t, t.Context(), map[string]string{envPIN: "777"},
			"-url", base, "-skip-setup", "-state", state, "-mode", "pin", "-clients", "2", "-duration", "200ms")
		if code != exitOK || s.Errors.Total != 0 || s.Successes == 0 {
			t.Fatalf("run %d: exit %d %+v\n%s", i, code, s, out)
		}
		last = s.Requests
	}
	_, users, err = loadState(state)
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, u := range users {
		sum += u.Counter
	}
	if sum < uint64(last) {
		t.Errorf("saved counters sum to %d, less than the last run's %d requests", sum, last)
	}

	// -users picks a subset; mismatches are refused clearly.
	if s, code, out := runJSON(t, t.Context(), map[string]string{envPIN: "777"}, "-url", base, "-skip-setup", "-state", state,
		"-mode", "pin", "-users", "2", "-duration", "100ms"); code != exitOK || s.Users != 2 {
		t.Errorf("subset: exit %d %+v\n%s", code, s, out)
	}
	for name, args := range map[string][]string{
		"valid on PIN tokens": {"-mode", "valid"},
		"other realm":         {"-mode", "pin", "-realm", "other"},
		"other prefix":        {"-mode", "pin", "-prefix", "zz"},
		"too many users":      {"-mode", "pin", "-users", "6"},
	} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{envPIN: "777"}
			if args[1] == "valid" {
				env = nil
			}
			_, code, out := runJSON(t, t.Context(), env, append([]string{"-url", base, "-skip-setup", "-state", state, "-duration", "100ms"}, args...)...)
			if code != exitFailed || !strings.Contains(out, "authbench: ") {
				t.Errorf("exit %d\n%s", code, out)
			}
		})
	}
}

func TestSetupErrors(t *testing.T) {
	f := newFake(t)
	base := f.start(t)
	_, code, out := runJSON(t, t.Context(), map[string]string{envAdminPassword: "wrong-password"},
		"-url", base, "-users", "2", "-duration", "100ms", "-passwd-dir", t.TempDir())
	if code != exitFailed || !strings.Contains(out, "Wrong credentials") || strings.Contains(out, "wrong-password") {
		t.Errorf("exit %d\n%s", code, out)
	}

	// Nothing listens: a clear message, no load.
	srv := httptest.NewServer(http.NotFoundHandler())
	dead := srv.URL
	srv.Close()
	_, code, out = runJSON(t, t.Context(), map[string]string{envAdminPassword: "x"}, "-url", dead, "-duration", "100ms")
	if code != exitFailed || !strings.Contains(out, "setup: admin login") {
		t.Errorf("dead server: exit %d\n%s", code, out)
	}
}

func TestInterrupt(t *testing.T) {
	f := newFake(t)
	base := f.start(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	s, code, out := runJSON(t, ctx, map[string]string{envAdminPassword: f.password},
		"-url", base, "-users", "3", "-clients", "2", "-duration", "1m", "-passwd-dir", t.TempDir())
	if code != exitInterrupted || !s.Interrupted || s.Requests == 0 || s.Errors.Total != 0 {
		t.Errorf("exit %d %+v\n%s", code, s, out)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the interrupt took %s to stop the run", time.Since(start))
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   bool
		out    outcome
		msg    string
	}{
		{"accepted", 200, `{"result":{"status":true,"value":true}}`, true, outOK, ""},
		{"rejected as expected", 200, `{"result":{"status":true,"value":false}}`, false, outOK, ""},
		{"rejected", 200, `{"result":{"status":true,"value":false},"detail":{"message":"wrong otp value"}}`, true, outValue, "result.value false, want true (wrong otp value)"},
		{"accepted in mode wrong", 200, `{"result":{"status":true,"value":true}}`, false, outValue, "result.value true, want false"},
		{"value not a bool", 200, `{"result":{"status":true,"value":"CHALLENGE"}}`, true, outValue, `result.value is "CHALLENGE"`},
		{"value missing", 200, `{"result":{"status":true}}`, true, outValue, "result.value is"},
		{"status false", 200, `{"result":{"status":false,"value":true}}`, true, outStatus, "result.status is false"},
		{"HTTP 400", 400, `{"result":{"status":false,"error":{"code":904,"message":"ERR904: User <x@bench> does not exist."}}}`, true, outStatus, "HTTP 400: ERR904: User <x@bench> does not exist. (code 904)"},
		{"HTTP 502 HTML", 502, `<html>bad gateway</html>`, true, outStatus, "HTTP 502: the answer is not a JSON envelope: <html>bad gateway</html>"},
		{"not JSON", 200, `hello`, true, outStatus, "not a JSON envelope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, msg := classify(tc.status, []byte(tc.body), tc.want)
			if out != tc.out || !strings.Contains(msg, tc.msg) {
				t.Errorf("classify = %d %q, want %d %q", out, msg, tc.out, tc.msg)
			}
		})
	}
}

func TestQuoteForm(t *testing.T) {
	for in, want := range map[string]string{"1234": "1234", "a%41": "a%2541", "%%": "%25%25", "": ""} {
		if got := quoteForm(in); got != want {
			t.Errorf("quoteForm(%q) = %q, want %q", in, got, want)
		}
		back, err := url.PathUnescape(quoteForm(in))
		if err != nil || back != in {
			t.Errorf("second decoding of %q gives %q, %v", in, back, err)
		}
	}
}

func TestDialerRefusesNonLoopback(t *testing.T) {
	hc := newHTTPClient(1)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	// 192.0.2.1 (TEST-NET-1) would only be dialled if the check failed.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://192.0.2.1:9/", nil)
	_, err := hc.Do(req)
	if err == nil || !strings.Contains(err.Error(), errNotLoopback.Error()) {
		t.Errorf("err = %v, want the loopback refusal", err)
	}
}

func TestPIDMemory(t *testing.T) {
	if _, err := os.Stat(procStatusPath(os.Getpid())); err != nil {
		t.Skip("no /proc")
	}
	f := newFake(t)
	base := f.start(t)
	env := map[string]string{envAdminPassword: f.password}
	// The fake runs in this process, so its memory is ours.
	s, code, out := runJSON(t, t.Context(), env, "-url", base, "-users", "2", "-duration", "100ms",
		"-passwd-dir", t.TempDir(), "-pid", strconv.Itoa(os.Getpid()))
	if code != exitOK || s.Server == nil || s.Server.PID != os.Getpid() || s.Server.RSSKB <= 0 ||
		s.Server.RSSBeforeKB <= 0 || s.Server.HWMKB < s.Server.RSSKB {
		t.Errorf("exit %d %+v\n%s", code, s.Server, out)
	}
	// A process that does not exist: refused before the setup.
	before := len(f.tokens)
	_, code, out = runJSON(t, t.Context(), env, "-url", base, "-users", "2", "-duration", "100ms",
		"-passwd-dir", t.TempDir(), "-pid", "999999999")
	if code != exitFailed || !strings.Contains(out, "-pid 999999999") || len(f.tokens) != before {
		t.Errorf("exit %d\n%s", code, out)
	}
}
