package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/builtin"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

// passwdFile writes logins as a passwd file (uids from base) and returns
// its path.
func passwdFile(t *testing.T, base int, logins ...string) string {
	t.Helper()
	var b strings.Builder
	for i, l := range logins {
		fmt.Fprintf(&b, "%s:x:%d:100:%s User,,,:/home/%s:/bin/sh\n", l, base+i, l, l)
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUserListPages: GET /user/ pages a realm of two passwd resolvers as
// one list (priority order, a login of the second resolver that the first
// has left out); value stays a plain list; detail places the page;
// out-of-range paging parameters are a parameter error (reliability B11).
func TestUserListPages(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	var first, second []string
	for i := range 25 {
		first = append(first, fmt.Sprintf("a%02d", i))
		second = append(second, fmt.Sprintf("b%02d", i))
	}
	second = append([]string{"a03", "a10"}, second...) // masked by the first resolver
	wantOK(t, e.admin(t, tok, "POST", "/resolver/p1", form("type", "passwdresolver", "fileName", passwdFile(t, 1000, first...))))
	wantOK(t, e.admin(t, tok, "POST", "/resolver/p2", form("type", "passwdresolver", "fileName", passwdFile(t, 5000, second...))))
	wantOK(t, e.admin(t, tok, "POST", "/realm/r1", `{"resolvers":["p1","p2"],"priority.p1":1,"priority.p2":2}`))

	all := wantOK(t, e.admin(t, tok, "GET", "/user/?realm=r1", "")).([]any)
	if len(all) != 50 {
		t.Fatalf("the whole realm: %d users, want 50", len(all))
	}
	if r := e.admin(t, tok, "GET", "/user/?realm=r1", ""); at(r.json, "detail") != nil {
		t.Errorf("an unpaged list that fits carries detail: %v", at(r.json, "detail"))
	}
	var walked []string
	for page := 1; page <= 5; page++ {
		r := e.admin(t, tok, "GET", fmt.Sprintf("/user/?realm=r1&pagesize=12&page=%d", page), "")
		list := wantOK(t, r).([]any)
		for _, u := range list {
			m := u.(map[string]any)
			walked = append(walked, m["username"].(string)+"@"+m["resolver"].(string))
		}
		next, prev := at(r.json, "detail.next"), at(r.json, "detail.prev")
		wantNext := any(float64(page + 1))
		if page == 5 {
			wantNext = nil
		}
		wantPrev := any(float64(page - 1))
		if page == 1 {
			wantPrev = nil
		}
		if next != wantNext || prev != wantPrev || at(r.json, "detail.page") != float64(page) || at(r.json, "detail.pagesize") != float64(12) {
			t.Errorf("page %d: detail %v", page, at(r.json, "detail"))
		}
	}
	if len(walked) != 50 || walked[0] != "a00@p1" || walked[24] != "a24@p1" || walked[25] != "b00@p2" || walked[49] != "b24@p2" {
		t.Errorf("the pages list %v", walked)
	}
	for _, w := range walked {
		if strings.HasSuffix(w, "@p2") && strings.HasPrefix(w, "a") {
			t.Errorf("%s is listed though p1 has the login", w)
		}
	}
	// A prefix search pages too.
	r := e.admin(t, tok, "GET", "/user/?realm=r1&username=b1*&pagesize=4&page=2", "")
	list := wantOK(t, r).([]any)
	if len(list) != 4 || list[0].(map[string]any)["username"] != "b14" || at(r.json, "detail.next") != float64(3) {
		t.Errorf("b1* page 2: %v %v", list, at(r.json, "detail"))
	}
	for _, bad := range []string{"pagesize=10000&page=1000000", "page=100000000000000000000", "pagesize=1000000000", "pagesize=0", "pagesize=-1", "pagesize=1000000", "pagesize=10001", "page=0", "page=-3", "page=x", "pagesize=1e3"} {
		r := e.admin(t, tok, "GET", "/user/?realm=r1&"+bad, "")
		if r.status != 400 || at(r.json, "result.status") != false {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
	if r := e.admin(t, tok, "GET", "/user/?realm=r1&pagesize=10000&page=100000", ""); r.status != 200 || len(wantOK(t, r).([]any)) != 0 {
		t.Errorf("a page past the end: %d %s", r.status, r.body)
	}
}

// loadingStore is a store that says it is loading while its flag is set.
type loadingStore struct {
	resolver.Resolver
	loading *atomic.Bool
}

func (l loadingStore) Loading() bool { return l.loading.Load() }

// TestReadyWhileLoading: readyz answers 503 naming the resolvers that are
// still loading their data, and ready once they are done: a resolver
// saved through the API starts loading at once, and a server started on a
// store that defines one loads it at start.
func TestReadyWhileLoading(t *testing.T) {
	var loading atomic.Bool
	loading.Store(true)
	types := builtin.Types()
	slow := resolvertest.MemType()
	memNew := slow.New
	slow.Name = "slowresolver"
	slow.Preload = true
	slow.New = func(ctx context.Context, cfg resolver.Config, env resolver.Env) (resolver.Resolver, error) {
		r, err := memNew(ctx, cfg, env)
		if err != nil {
			return nil, err
		}
		return loadingStore{r, &loading}, nil
	}
	types[slow.Name] = slow
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(types)})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/slow1", form("type", "slowresolver")))
	r := e.do(t, "GET", "/healthz/readyz", "", "", nil)
	if want := `{"hsm":"OK","resolvers":"loading: slow1","status":"not ready"}`; r.status != 503 || strings.TrimSpace(string(r.body)) != want {
		t.Errorf("readyz while loading: %d %s, want 503 %s", r.status, r.body, want)
	}
	loading.Store(false)
	r = e.do(t, "GET", "/healthz/readyz", "", "", nil)
	if r.status != 200 {
		t.Errorf("readyz after the load: %d %s", r.status, r.body)
	}

	// A second server on the same store loads slow1 when it starts.
	loading.Store(true)
	s2, err := authsrv.New(authsrv.WithStore(e.s.Store()), authsrv.WithResolverTypes(types),
		authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey), authsrv.WithKDFParams(cheapKDF))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var le *resolver.LoadingError
	if err := s2.Ready(t.Context()); !errors.As(err, &le) || len(le.Resolvers) != 1 || le.Resolvers[0] != "slow1" {
		t.Errorf("Ready of a server started while slow1 loads: %v", err)
	}
	loading.Store(false)
	// The rest of the start-up work (the token list set, the release of
	// the start's memory) follows the load within moments.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s2.Ready(t.Context())
		if err == nil {
			break
		}
		if !errors.Is(err, authsrv.ErrWarmingUp) && !errors.As(err, &le) || time.Now().After(deadline) {
			t.Fatalf("Ready after the load: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
