package scim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/resolver/scim"
)

func config(s *scimServer) resolver.Config {
	return resolver.Config{
		scim.ParamAuthserver:     s.URL() + authBase,
		scim.ParamResourceserver: s.URL() + scimBase + "/",
		scim.ParamClient:         "authsrv",
		scim.ParamSecret:         "s3cret-Client-Pw",
	}
}

// loopback is the dial policy of the tests, whose servers listen on
// loopback addresses.
var loopback = netguard.MustParse("127.0.0.0/8", "::1/128")

// open builds a store; without a dial policy in env it may dial loopback.
func open(t testing.TB, cfg resolver.Config, env resolver.Env) resolver.Resolver {
	t.Helper()
	if env.Dial == nil {
		env.Dial = loopback
	}
	typ := scim.Type()
	if err := typ.Validate(cfg); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	r, err := typ.New(context.Background(), cfg, env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// clock is a settable Env.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var kitFields = []string{resolver.KeyGivenname, resolver.KeySurname, resolver.KeyEmail, resolver.KeyPhone}

func TestConformance(t *testing.T) {
	s := newServer(t)
	resolvertest.Run(t, func(t *testing.T) resolver.Resolver {
		return open(t, config(s), resolver.Env{Log: zerolog.Nop()})
	}, resolvertest.Options{Passwords: false, SearchKeys: kitFields, Fields: kitFields})
	checkRequests(t, s.seen())
}

// TestInjection is reliability B5: ids reach the server as exactly one
// escaped path segment, search values as exactly one JSON string in a
// filter that parses, and nothing leaves the base path.
func TestInjection(t *testing.T) {
	s := newServer(t)
	r := open(t, config(s), resolver.Env{})
	defer r.Close()
	inputs := append(slices.Clone(resolvertest.Injection),
		"../Groups", "a/b", "..", ".", "./alice", "alice/..", "%2e%2e", "%2F", "..%2FGroups", "a?attributes=password",
		"a#x", `al"ice\`, `\"`, "alice%00", "alice\r\nX-Injected: 1", "alice;x", "alice%", "Users", "?", "#", "é/../x")
	ctx := t.Context()
	for _, in := range inputs {
		s.reset()
		uid, err := r.UserID(ctx, in)
		if err == nil {
			t.Errorf("UserID(%q) = %q", in, uid)
		} else if !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("UserID(%q): %v, want ErrNoUser", in, err)
		}
		if info, err := r.User(ctx, in); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("User(%q) = %v, %v; want ErrNoUser", in, info, err)
		}
		for _, key := range []string{resolver.KeyUsername, resolver.KeyEmail} {
			list, err := r.Search(ctx, map[string]string{key: in})
			if err != nil {
				t.Errorf("Search(%s=%q): %v", key, in, err)
			}
			if !strings.Contains(in, "*") && len(list) > 0 {
				t.Errorf("Search(%s=%q) matched %d users", key, in, len(list))
			}
		}
		reqs := s.seen()
		checkRequests(t, reqs)
		for _, req := range reqs {
			switch {
			case strings.HasPrefix(req.path, usersPath+"/"):
				if id, _ := url.PathUnescape(strings.TrimPrefix(req.path, usersPath+"/")); id != in {
					t.Errorf("input %q reached the server as id %q", in, id)
				}
			case req.path == usersPath:
				q, _ := url.ParseQuery(req.query)
				conds, _ := parseFilter(q.Get("filter"))
				want := strings.TrimSuffix(strings.TrimPrefix(in, "*"), "*")
				if strings.Contains(want, "*") {
					want = in
				}
				if want != "" && (len(conds) != 1 || conds[0].value != want) {
					t.Errorf("input %q reached the server as filter %q", in, q.Get("filter"))
				}
			}
		}
	}
}

func TestUserInfo(t *testing.T) {
	s := newServer(t)
	s.set(func(s *scimServer) {
		s.users = append(s.users, map[string]any{
			"id":       "2819c223-7f76-453a-919d-413861904646",
			"userName": "bjensen",
			"name":     map[string]any{"givenName": "Barbara", "familyName": "Jensen"},
			"emails": []any{
				map[string]any{"value": "bjensen@example.com", "type": "work"},
				map[string]any{"value": "babs@jensen.org", "type": "home", "primary": true},
			},
			"phoneNumbers": []any{},
			"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": map[string]any{"employeeNumber": "701984", "costCenter": 4130},
			"X-Custom": map[string]any{"Mobile": "+49 170 5555"},
		}, map[string]any{"id": "minimal", "userName": "minimal"})
	})
	r := open(t, config(s), resolver.Env{})
	defer r.Close()
	ctx := t.Context()
	cases := []struct {
		uid  string
		want resolver.Info
	}{
		{"2819c223-7f76-453a-919d-413861904646", resolver.Info{"username": "bjensen", "userid": "2819c223-7f76-453a-919d-413861904646",
			"givenname": "Barbara", "surname": "Jensen", "email": "bjensen@example.com", "phone": "", "mobile": ""}},
		{"minimal", resolver.Info{"username": "minimal", "userid": "minimal", "givenname": "", "surname": "", "email": "", "phone": "", "mobile": ""}},
		{"alice", resolver.Info{"username": "alice", "userid": "alice", "givenname": "Alice", "surname": "Liddell",
			"email": "alice@example.org", "phone": "+4930111", "mobile": ""}},
	}
	for _, tc := range cases {
		got, err := r.User(ctx, tc.uid)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("User(%s) = %v, %v\nwant %v", tc.uid, got, err, tc.want)
		}
	}
	// The login name is the SCIM id (admin-config 3.4).
	if uid, err := r.UserID(ctx, "2819c223-7f76-453a-919d-413861904646"); err != nil || uid != "2819c223-7f76-453a-919d-413861904646" {
		t.Errorf("UserID(id) = %q, %v", uid, err)
	}
	if _, err := r.UserID(ctx, "bjensen"); !errors.Is(err, resolver.ErrNoUser) {
		t.Errorf("UserID(userName) = %v; the login is the id", err)
	}
	if ok, err := r.CheckPassword(ctx, "alice", "alice-Pw1"); ok || err != nil {
		t.Errorf("CheckPassword = %v, %v", ok, err)
	}

	// A mapping adds and removes keys; extension URNs and case-insensitive
	// names work.
	cfg := config(s)
	cfg[scim.ParamMapping] = `{"mobile":"x-custom.mobile","employee":"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber","cost":"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:costCenter","phone":""}`
	r2 := open(t, cfg, resolver.Env{})
	defer r2.Close()
	got, err := r2.User(ctx, "2819c223-7f76-453a-919d-413861904646")
	want := resolver.Info{"username": "bjensen", "userid": "2819c223-7f76-453a-919d-413861904646", "givenname": "Barbara", "surname": "Jensen",
		"email": "bjensen@example.com", "mobile": "+49 170 5555", "employee": "701984", "cost": "4130"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mapped User = %v, %v\nwant %v", got, err, want)
	}
	if f := r2.(resolver.Fielder).Fields(); !slices.Equal(f, []string{"cost", "email", "employee", "givenname", "mobile", "surname", "username"}) {
		t.Errorf("Fields = %v", f)
	}
	if _, err := r2.Search(ctx, map[string]string{"phone": "+4930111"}); !errors.Is(err, resolver.ErrSearchKey) {
		t.Errorf("Search by an unmapped key: %v", err)
	}
}

func TestSearch(t *testing.T) {
	s := newServer(t)
	r := open(t, config(s), resolver.Env{})
	defer r.Close()
	cases := []struct {
		filter     map[string]string
		want       []string
		wantFilter string // the filter the server got ("" = none)
	}{
		{nil, []string{"alice", "bob", "carol.smith", "müller"}, ""},
		{map[string]string{"username": ""}, []string{"alice", "bob", "carol.smith", "müller"}, ""},
		{map[string]string{"username": "**"}, []string{"alice", "bob", "carol.smith", "müller"}, ""},
		{map[string]string{"username": "al*"}, []string{"alice"}, `userName sw "al"`},
		{map[string]string{"username": "*.smith"}, []string{"carol.smith"}, `userName ew ".smith"`},
		{map[string]string{"username": "*o*"}, []string{"bob", "carol.smith"}, `userName co "o"`},
		{map[string]string{"username": "ALICE"}, []string{"alice"}, `userName eq "ALICE"`},
		{map[string]string{"username": "a*e"}, nil, `userName eq "a*e"`},
		{map[string]string{"username": `a"b\c`}, nil, `userName eq "a\"b\\c"`},
		{map[string]string{"username": "<&>"}, nil, `userName eq "<&>"`},
		{map[string]string{"email": "*@example.org", "givenname": "Hans"}, []string{"müller"}, `emails.value ew "@example.org" and name.givenName eq "Hans"`},
		{map[string]string{"surname": "builder"}, []string{"bob"}, `name.familyName eq "builder"`},
		{map[string]string{"phone": "+4930444"}, []string{"carol.smith"}, `phoneNumbers.value eq "+4930444"`},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.filter), func(t *testing.T) {
			s.reset()
			list, err := r.Search(t.Context(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range list {
				got = append(got, i.String(resolver.KeyUsername))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			reqs := s.seen()
			checkRequests(t, reqs)
			last := reqs[len(reqs)-1]
			q, _ := url.ParseQuery(last.query)
			if f := q.Get("filter"); f != tc.wantFilter {
				t.Errorf("filter %q, want %q", f, tc.wantFilter)
			}
		})
	}
	for _, key := range []string{"mobile", "userid", "description", "password", "Username", ""} {
		if _, err := r.Search(t.Context(), map[string]string{key: "x"}); !errors.Is(err, resolver.ErrSearchKey) {
			t.Errorf("Search by %q: %v, want ErrSearchKey", key, err)
		}
	}
	// Invalid UTF-8 cannot match: no request at all.
	s.reset()
	if list, err := r.Search(t.Context(), map[string]string{"username": "\xff"}); err != nil || len(list) != 0 {
		t.Errorf("Search(invalid UTF-8) = %v, %v", list, err)
	}
	if n := len(s.seen()); n != 0 {
		t.Errorf("%d requests for an invalid UTF-8 search", n)
	}
}

// TestIgnoredFilter: a server that ignores the filter does not widen a
// username search.
func TestIgnoredFilter(t *testing.T) {
	s := newServer(t)
	s.set(func(s *scimServer) { s.ignoreFilter = true })
	r := open(t, config(s), resolver.Env{})
	defer r.Close()
	list, err := r.Search(t.Context(), map[string]string{"username": "bob"})
	if err != nil || len(list) != 1 || list[0].String(resolver.KeyUsername) != "bob" {
		t.Errorf("Search = %v, %v", list, err)
	}
}

func TestPaging(t *testing.T) {
	s := newServer(t)
	s.set(func(s *scimServer) {
		for i := range 1200 {
			s.users = append(s.users, map[string]any{"id": fmt.Sprintf("u%04d", i), "userName": fmt.Sprintf("user%04d", i)})
		}
	})
	r := open(t, config(s), resolver.Env{})
	defer r.Close()
	s.reset()
	list, err := r.Search(t.Context(), map[string]string{"username": "user00*"})
	if err != nil || len(list) != 100 {
		t.Fatalf("Search(user00*) = %d users, %v", len(list), err)
	}
	list, err = r.Search(t.Context(), map[string]string{"username": "user0*"})
	if err != nil || len(list) != 1000 {
		t.Fatalf("Search(user0*) = %d users, %v", len(list), err)
	}
	seenIDs := map[string]bool{}
	for _, i := range list {
		seenIDs[i.String(resolver.KeyUserID)] = true
	}
	if len(seenIDs) != 1000 {
		t.Errorf("%d distinct users in 1000", len(seenIDs))
	}
	list, err = r.Search(t.Context(), nil)
	if err != nil || len(list) != 1000 {
		t.Errorf("Search(all) = %d users (the cap is 1000), %v", len(list), err)
	}
	if v, desc := r.(resolver.Tester).Test(t.Context()); v != true || desc != "Found 1204 users" {
		t.Errorf("Test() = %v, %q", v, desc)
	}
	checkRequests(t, s.seen())
}

func TestTokenCache(t *testing.T) {
	s := newServer(t)
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	r := open(t, config(s), resolver.Env{Now: clk.Now})
	defer r.Close()
	ctx := t.Context()
	lookup := func() {
		t.Helper()
		if _, err := r.UserID(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		lookup()
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = r.Search(ctx, map[string]string{"username": "b*"}) })
	}
	wg.Wait()
	if n := s.tokenFetches(); n != 1 {
		t.Errorf("%d token fetches for 28 calls, want 1", n)
	}
	clk.Advance(3500 * time.Second) // expires_in 3600: still good
	lookup()
	if n := s.tokenFetches(); n != 1 {
		t.Errorf("%d token fetches before expiry, want 1", n)
	}
	clk.Advance(75 * time.Second) // 25 s before expiry: within the margin
	lookup()
	if n := s.tokenFetches(); n != 2 {
		t.Errorf("%d token fetches after expiry, want 2", n)
	}
	lookup()
	if n := s.tokenFetches(); n != 2 {
		t.Errorf("%d token fetches, want 2", n)
	}

	// A token the server no longer accepts is replaced once.
	s.revokeTokens()
	lookup()
	if n := s.tokenFetches(); n != 3 {
		t.Errorf("%d token fetches after a 401, want 3", n)
	}

	// Without expires_in the token is kept for a minute; a numeric string
	// is read too.
	for _, exp := range []any{nil, "120"} {
		s.set(func(s *scimServer) { s.expiresIn = exp })
		r2 := open(t, config(s), resolver.Env{Now: clk.Now})
		before := s.tokenFetches()
		if _, err := r2.UserID(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(50 * time.Second)
		if _, err := r2.UserID(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		if n := s.tokenFetches() - before; n != 1 {
			t.Errorf("expires_in %v: %d fetches within 50 s", exp, n)
		}
		clk.Advance(100 * time.Second)
		if _, err := r2.UserID(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		if n := s.tokenFetches() - before; n != 2 {
			t.Errorf("expires_in %v: %d fetches after 150 s", exp, n)
		}
		_ = r2.Close()
	}
}

// TestCredentials: a refused client is unavailable, and the secret shows
// nowhere (errors, logs, %v of the store).
func TestCredentials(t *testing.T) {
	s := newServer(t)
	var logs logBuf
	cfg := config(s)
	cfg[scim.ParamSecret] = "wrong-Secret-42"
	r := open(t, cfg, resolver.Env{Log: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer r.Close()
	_, err := r.UserID(t.Context(), "alice")
	if !errors.Is(err, resolver.ErrUnavailable) {
		t.Errorf("UserID with a wrong secret: %v, want ErrUnavailable", err)
	}
	v, desc := r.(resolver.Tester).Test(t.Context())
	if v != false || desc != "The authorization server refused the client credentials." {
		t.Errorf("Test() = %v, %q", v, desc)
	}
	for _, text := range []string{err.Error(), desc, logs.String(), fmt.Sprintf("%v %+v %#v %s", r, r, r, r)} {
		if strings.Contains(text, "wrong-Secret-42") || strings.Contains(text, "tok-") {
			t.Errorf("a secret or token shows: %s", text)
		}
	}
	if _, _, msg, _, _ := apierr.Wire(err); msg != "ERR907: The user store is not available." {
		t.Errorf("wire message %q", msg)
	}

	r2 := open(t, config(s), resolver.Env{Log: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	defer r2.Close()
	if _, err := r2.UserID(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{logs.String(), fmt.Sprintf("%v %+v %#v", r2, r2, r2)} {
		if strings.Contains(text, "s3cret-Client-Pw") || strings.Contains(text, "tok-") {
			t.Errorf("a secret or token shows: %s", text)
		}
	}
	for _, p := range scim.Type().Params {
		if (p.Type == resolver.Password) != (p.Name == scim.ParamSecret) {
			t.Errorf("param %s has type %s", p.Name, p.Type)
		}
	}
}

const bodyMarker = "REMOTE-BODY-do-not-show"

// TestUnavailable: failing servers end within TIMEOUT with ErrUnavailable
// and without the remote body.
func TestUnavailable(t *testing.T) {
	type failure func(w http.ResponseWriter, r *http.Request) bool
	users := func(f failure) failure {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, usersPath) {
				return false
			}
			return f(w, r)
		}
	}
	token := func(f failure) failure {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != tokenPath {
				return false
			}
			return f(w, r)
		}
	}
	status := func(code int, ct string) failure {
		return func(w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"detail":"` + bodyMarker + `"}`))
			return true
		}
	}
	slow := func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return true
	}
	slowBody := func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/scim+json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":"alice",`))
		w.(http.Flusher).Flush()
		return slow(w, r)
	}
	closeConn := func(w http.ResponseWriter, _ *http.Request) bool {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return true
	}
	// The huge answer is made once: five parallel calls each making 5 MiB
	// under the race detector were what made this test slow.
	hugeBody := []byte(`{"id":"alice","userName":"` + strings.Repeat(bodyMarker, (5<<20)/len(bodyMarker)) + `"}`)
	huge := func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Content-Type", "application/scim+json")
		w.Header().Set("Content-Length", strconv.Itoa(len(hugeBody)))
		_, _ = w.Write(hugeBody)
		return true
	}
	hugeChunked := func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Content-Type", "application/scim+json")
		_, _ = w.Write(hugeBody)
		return true
	}
	redirect := func(w http.ResponseWriter, r *http.Request) bool {
		http.Redirect(w, r, "/elsewhere/Users/alice?"+bodyMarker, http.StatusFound)
		return true
	}
	cases := []struct {
		name string
		f    failure
		desc string
	}{
		{"500", users(status(500, "application/scim+json")), "The resource server answered with HTTP status 500."},
		{"503 text", users(status(503, "text/plain")), "The resource server answered with HTTP status 503."},
		{"400", users(status(400, "application/scim+json")), "The resource server answered with HTTP status 400."},
		{"not JSON", users(status(200, "text/html")), "The resource server's answer is not valid SCIM JSON."},
		{"bad JSON", users(func(w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id": ` + bodyMarker))
			return true
		}), "The resource server's answer is not valid SCIM JSON."},
		{"huge", users(huge), "The resource server's answer is not valid SCIM JSON."},
		{"huge chunked", users(hugeChunked), "The resource server's answer is not valid SCIM JSON."},
		{"redirect", users(redirect), "The resource server answered with a redirect."},
		{"slow", users(slow), "The SCIM server did not answer in time."},
		{"slow body", users(slowBody), "The SCIM server did not answer in time."},
		{"closed", users(closeConn), "The SCIM server is not reachable."},
		{"token 500", token(status(500, "application/json")), "The authorization server did not issue a token."},
		{"token slow", token(slow), "The SCIM server did not answer in time."},
		{"token closed", token(closeConn), "The authorization server did not issue a token."},
		{"token not JSON", token(status(200, "text/plain")), "The authorization server did not issue a token."},
		{"token without access_token", token(status(200, "application/json")), "The authorization server did not issue a token."},
		{"token type mac", token(func(w http.ResponseWriter, _ *http.Request) bool {
			writeJSON(w, "application/json", 200, map[string]any{"access_token": "x", "token_type": "mac"})
			return true
		}), "The authorization server did not issue a token."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.set(func(s *scimServer) { s.override = tc.f })
			cfg := config(s)
			cfg[scim.ParamTimeout] = "1"
			if strings.HasPrefix(tc.name, "huge") {
				// Reading megabytes up to the cap must not race the
				// timeout on a loaded machine under -race.
				cfg[scim.ParamTimeout] = "20"
			}
			r := open(t, cfg, resolver.Env{})
			defer r.Close()
			calls := []func(ctx context.Context) error{
				func(ctx context.Context) error { _, err := r.UserID(ctx, "alice"); return err },
				func(ctx context.Context) error { _, err := r.User(ctx, "alice"); return err },
				func(ctx context.Context) error {
					_, err := r.Search(ctx, map[string]string{"username": "a*"})
					return err
				},
				r.(resolver.Pinger).Ping,
			}
			// All calls at once, so the slow cases cost one TIMEOUT.
			var wg sync.WaitGroup
			for i, call := range calls {
				wg.Go(func() {
					start := time.Now()
					err := call(t.Context())
					// TIMEOUT is 1 s and the slow servers answer after
					// 10 s: 2.5 s shows the cut and leaves a loaded
					// machine under the race detector room.
					if d := time.Since(start); d > 2500*time.Millisecond {
						t.Errorf("call %d took %v with TIMEOUT 1", i, d)
					}
					if !errors.Is(err, resolver.ErrUnavailable) {
						t.Errorf("call %d: %v, want ErrUnavailable", i, err)
					} else if strings.Contains(err.Error(), bodyMarker) || strings.Contains(err.Error(), "alice") {
						t.Errorf("call %d: the error shows the body or URL: %v", i, err)
					}
				})
			}
			wg.Go(func() {
				v, desc := r.(resolver.Tester).Test(t.Context())
				if v != false || desc != tc.desc {
					t.Errorf("Test() = %v, %q; want false, %q", v, desc, tc.desc)
				}
			})
			wg.Wait()
			for _, req := range s.seen() {
				if strings.HasPrefix(req.path, "/elsewhere") {
					t.Errorf("a redirect was followed: %+v", req)
				}
			}
		})
	}

	t.Run("down", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		cfg := resolver.Config{scim.ParamAuthserver: "http://" + addr, scim.ParamResourceserver: "http://" + addr + "/scim",
			scim.ParamClient: "c", scim.ParamSecret: "s", scim.ParamTimeout: "1"}
		r := open(t, cfg, resolver.Env{})
		defer r.Close()
		if _, err := r.UserID(t.Context(), "alice"); !errors.Is(err, resolver.ErrUnavailable) {
			t.Errorf("UserID: %v", err)
		}
		if v, desc := r.(resolver.Tester).Test(t.Context()); v != false || desc != "The authorization server did not issue a token." {
			t.Errorf("Test() = %v, %q", v, desc)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		s := newServer(t)
		s.set(func(s *scimServer) { s.override = users(slow) })
		r := open(t, config(s), resolver.Env{})
		defer r.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := r.UserID(ctx, "alice"); !errors.Is(err, resolver.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("UserID: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v with a 200 ms context", d)
		}
	})
}

// TestWrongAnswer: an answer for another id is not that user.
func TestWrongAnswer(t *testing.T) {
	s := newServer(t)
	s.set(func(s *scimServer) {
		s.override = func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == usersPath+"/ALICE" {
				writeJSON(w, "application/scim+json", 200, kitUser(resolvertest.Users[0]))
				return true
			}
			return false
		}
	})
	r := open(t, config(s), resolver.Env{})
	defer r.Close()
	if uid, err := r.UserID(t.Context(), "ALICE"); !errors.Is(err, resolver.ErrNoUser) {
		t.Errorf("UserID(ALICE) = %q, %v; the server answered for alice", uid, err)
	}
}

func TestTesterAndClose(t *testing.T) {
	s := newServer(t)
	r := open(t, config(s), resolver.Env{})
	if v, desc := r.(resolver.Tester).Test(t.Context()); v != true || desc != "Found 4 users" {
		t.Errorf("Test() = %v, %q", v, desc)
	}
	if err := r.(resolver.Pinger).Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if _, ok := r.(resolver.Editor); ok {
		t.Error("the store claims to be an Editor")
	}
	typ := scim.Type()
	if typ.Name != "scimresolver" || typ.Editable(config(s)) || typ.CacheTimeout(config(s)) != 0 {
		t.Error("type flags")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.UserID(t.Context(), "alice"); !errors.Is(err, resolver.ErrUnavailable) {
		t.Errorf("UserID after Close: %v", err)
	}
	if v, desc := r.(resolver.Tester).Test(t.Context()); v != false || desc != "The resolver is closed." {
		t.Errorf("Test() after Close = %v, %q", v, desc)
	}
}

func TestValidate(t *testing.T) {
	good := resolver.Config{
		scim.ParamAuthserver: "https://auth.example.org", scim.ParamResourceserver: "https://scim.example.org/scim/v2",
		scim.ParamClient: "c", scim.ParamSecret: "s",
	}
	with := func(k, v string) resolver.Config {
		c := resolver.Config{}
		for kk, vv := range good {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	cases := []struct {
		name string
		cfg  resolver.Config
		want string
	}{
		{"good", good, ""},
		{"trailing slash", with(scim.ParamResourceserver, "https://scim.example.org/scim/v2/"), ""},
		{"http and port", with(scim.ParamAuthserver, "http://127.0.0.1:8080/realms/x"), ""},
		{"timeout", with(scim.ParamTimeout, "30"), ""},
		{"mapping", with(scim.ParamMapping, `{"mobile":"phoneNumbers.value","email":""}`), ""},
		{"empty mapping", with(scim.ParamMapping, " "), ""},
		{"no auth server", with(scim.ParamAuthserver, ""), "Missing parameter: Authserver"},
		{"no resource server", with(scim.ParamResourceserver, ""), "Missing parameter: Resourceserver"},
		{"no client", with(scim.ParamClient, ""), "Missing parameter: Client"},
		{"no secret", with(scim.ParamSecret, ""), "Missing parameter: Secret"},
		{"censored secret", with(scim.ParamSecret, resolver.Censored), "The parameter Secret is the censored placeholder, not a secret."},
		{"ftp", with(scim.ParamResourceserver, "ftp://scim.example.org/"), "Resourceserver must be an http or https URL."},
		{"relative", with(scim.ParamResourceserver, "/scim/v2"), "Resourceserver must be an http or https URL."},
		{"no host", with(scim.ParamAuthserver, "https:///x"), "Authserver must be an http or https URL."},
		{"garbage", with(scim.ParamAuthserver, "::"), "Authserver must be an http or https URL."},
		{"query", with(scim.ParamResourceserver, "https://scim.example.org/scim?x=1"), "Resourceserver must not contain user info, a query or a fragment."},
		{"empty query", with(scim.ParamResourceserver, "https://scim.example.org/scim?"), "Resourceserver must not contain user info, a query or a fragment."},
		{"fragment", with(scim.ParamResourceserver, "https://scim.example.org/scim#x"), "Resourceserver must not contain user info, a query or a fragment."},
		{"user info", with(scim.ParamAuthserver, "https://u:p@auth.example.org"), "Authserver must not contain user info, a query or a fragment."},
		{"dot segments", with(scim.ParamResourceserver, "https://scim.example.org/a/../scim"), "Resourceserver must not contain . or .. path segments."},
		{"timeout text", with(scim.ParamTimeout, "ten"), "TIMEOUT must be a number of seconds from 1 to 300."},
		{"timeout zero", with(scim.ParamTimeout, "0"), "TIMEOUT must be a number of seconds from 1 to 300."},
		{"timeout huge", with(scim.ParamTimeout, "100000"), "TIMEOUT must be a number of seconds from 1 to 300."},
		{"mapping not JSON", with(scim.ParamMapping, "{"), "Mapping must be a JSON object of strings."},
		{"mapping list", with(scim.ParamMapping, `["a"]`), "Mapping must be a JSON object of strings."},
		{"mapping bad path", with(scim.ParamMapping, `{"email":"emails[type eq \"work\"].value"}`), `Mapping: "emails[type eq \"work\"].value" is not a SCIM attribute path.`},
		{"mapping userid", with(scim.ParamMapping, `{"userid":"externalId"}`), `Mapping: "userid" cannot be mapped.`},
		{"mapping password", with(scim.ParamMapping, `{"password":"password"}`), `Mapping: "password" cannot be mapped.`},
		{"mapping no username", with(scim.ParamMapping, `{"username":""}`), "Mapping: username must stay mapped."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := scim.Type().Validate(tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("valid, want %q", tc.want)
			}
			if !errors.Is(err, resolver.ErrConfig) {
				t.Errorf("%v is not ErrConfig", err)
			}
			if _, _, msg, _, _ := apierr.Wire(err); msg != "ERR907: "+tc.want {
				t.Errorf("message %q, want %q", msg, "ERR907: "+tc.want)
			}
			if _, err := scim.Type().New(t.Context(), tc.cfg, resolver.Env{}); err == nil {
				t.Error("New accepts it")
			}
		})
	}
}

// S8: under the default dial policy (Env.Dial nil) the SCIM server on a
// loopback address is refused before any connection: the test names the
// address and the rule, and the server sees no request.
func TestDialPolicy(t *testing.T) {
	s := newServer(t)
	r, err := scim.Type().New(t.Context(), config(s), resolver.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v, desc := r.(resolver.Tester).Test(t.Context())
	if v != false || !strings.HasPrefix(desc, "The SCIM server is not reachable: connection to 127.0.0.1:") ||
		!strings.HasSuffix(desc, "(loopback); allow it with -allow-dial.") {
		t.Errorf("Test = %v, %q", v, desc)
	}
	if _, err := r.User(t.Context(), "u1"); !errors.Is(err, netguard.ErrRefused) || !errors.Is(err, resolver.ErrUnavailable) {
		t.Errorf("User: %v", err)
	}
	if n := len(s.seen()); n != 0 || s.tokenFetches() != 0 {
		t.Errorf("the server saw %d requests", n)
	}
}
