package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/resolver/builtin"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// clientWriteStore counts the write transactions that touch the client
// application rows.
type clientWriteStore struct {
	store.Store
	clientWrites atomic.Int64
	updates      atomic.Int64
}

type clientWriteTx struct {
	store.Tx
	touched *atomic.Bool
}

func (tx clientWriteTx) Bucket(name string) store.Bucket {
	if name == "clientapps" {
		tx.touched.Store(true)
	}
	return tx.Tx.Bucket(name)
}

func (s *clientWriteStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	var touched atomic.Bool
	s.updates.Add(1)
	err := s.Store.Update(ctx, func(tx store.Tx) error { return fn(clientWriteTx{Tx: tx, touched: &touched}) })
	if touched.Load() {
		s.clientWrites.Add(1)
	}
	return err
}

// getClientApps is GET /client/ as the admin: its hostname fields are
// null by design (spec admin-config 6.7; no real client reads them).
func getClientApps(t *testing.T, e *env, tok string) reply {
	t.Helper()
	return e.do(t, "GET", "/client/", "", "", map[string]string{"Authorization": tok})
}

// validateFrom sends /validate/check from addr with the User-Agent ua
// ("" for none).
func validateFrom(t *testing.T, h http.Handler, addr, ua, body string) int {
	t.Helper()
	req := httptest.NewRequest("POST", "/validate/check", strings.NewReader(body))
	req.Header.Set("Content-Type", formType)
	req.RemoteAddr = addr
	if ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestClientApplications is the issue's "done when": 100 validate calls
// from two User-Agents show two client types in GET /client/ with their
// addresses, without a store write per call for the record; the rows
// survive a restart; the user role is refused.
func TestClientApplications(t *testing.T) {
	st := &clientWriteStore{Store: storetest.Open(t)}
	e := newEnvWith(t, []authsrv.Option{authsrv.WithStore(st)})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "spass", "serial", "SP1", "pin", "static1")))

	if v := wantOK(t, getClientApps(t, e, tok)); !reflect.DeepEqual(v, map[string]any{}) {
		t.Fatalf("GET /client/ before any check = %v; want {}", v)
	}

	before := st.clientWrites.Load()
	const pam, cp = "PAM", "privacyidea-cp/3.10 (Windows 10.0.19045)"
	for i := range 100 {
		pass := "static1"
		if i%10 == 0 {
			pass = "wrong" // a rejected check records its client too
		}
		addr, ua := "10.0.0.5:40000", pam
		if i%2 == 1 {
			addr, ua = "[2001:db8::6]:40001", cp
		}
		if code := validateFrom(t, e.h, addr, ua, form("serial", "SP1", "pass", pass)); code != 200 {
			t.Fatalf("validate %d: status %d", i, code)
		}
		if i == 49 {
			e.clk.add(90 * time.Second)
		}
	}
	validateFrom(t, e.h, "garbage", "", form("serial", "SP1", "pass", "static1"))
	if n := st.clientWrites.Load() - before; n != 0 {
		t.Errorf("%d store writes for the client record during 101 validate calls; want 0", n)
	}

	seen := testStart.Add(90 * time.Second).Format(http.TimeFormat)
	want := map[string]any{
		pam:       []any{map[string]any{"ip": "10.0.0.5", "hostname": nil, "lastseen": seen}},
		cp:        []any{map[string]any{"ip": "2001:db8::6", "hostname": nil, "lastseen": seen}},
		"unknown": []any{map[string]any{"ip": "0.0.0.0", "hostname": nil, "lastseen": seen}},
	}
	r := getClientApps(t, e, tok)
	if v := wantOK(t, r); !reflect.DeepEqual(v, want) {
		t.Errorf("GET /client/ = %v\nwant %v", v, want)
	}
	if !strings.Contains(string(r.body), `"lastseen":"Sun, 22 Nov 2026 10:01:30 GMT"`) {
		t.Errorf("lastseen not in Flask's date form: %s", r.body)
	}

	// The flush writes all three in one transaction; a second one
	// without new calls writes nothing.
	if w, _, err := e.s.ClientApps().Flush(t.Context()); err != nil || w != 3 {
		t.Fatalf("Flush = %d, %v; want 3 rows", w, err)
	}
	if n := st.clientWrites.Load() - before; n != 1 {
		t.Errorf("%d write transactions for the client rows after the flush; want 1", n)
	}
	if w, _, err := e.s.ClientApps().Flush(t.Context()); err != nil || w != 0 {
		t.Errorf("idle Flush = %d, %v; want 0", w, err)
	}

	// The read is audited.
	a := wantOK(t, e.admin(t, tok, "GET", "/audit/?action=*client*", ""))
	if n, _ := at(a, "count").(float64); n < 2 {
		t.Errorf("audit entries of GET /client/ = %v; want 2", at(a, "count"))
	}

	// The user role is refused; an admin policy without clienttype
	// refuses, one with it allows.
	userTok, err := server.IssueToken(e.s, "alice", "realm1", "user")
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do(t, "GET", "/client/", "", "", map[string]string{"Authorization": userTok}), 401, 4306,
		"ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
	wantOK(t, e.admin(t, tok, "POST", "/policy/pw", form("scope", "admin", "action", "policywrite, policydelete", "adminuser", "admin")))
	wantError(t, getClientApps(t, e, tok), 403, 303,
		"ERR303: Admin actions are defined, but the action clienttype is not allowed!")
	wantOK(t, e.admin(t, tok, "POST", "/policy/ct", form("scope", "admin", "action", "clienttype", "adminuser", "admin")))
	wantOK(t, getClientApps(t, e, tok))

	// Another call, not flushed before the restart: Close writes it.
	e.clk.add(time.Minute)
	validateFrom(t, e.h, "10.0.0.7:1", pam, form("serial", "SP1", "pass", "static1"))
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := authsrv.New(authsrv.WithStore(st), authsrv.WithResolverTypes(builtin.Types()),
		authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey), authsrv.WithKDFParams(cheapKDF),
		authsrv.WithClock(e.clk.now), authsrv.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	e2 := &env{s: s2, h: server.New(s2), clk: e.clk, log: e.log}
	got := wantOK(t, getClientApps(t, e2, e2.login(t)))
	later := testStart.Add(150 * time.Second).Format(http.TimeFormat)
	want[pam] = []any{
		map[string]any{"ip": "10.0.0.5", "hostname": nil, "lastseen": seen},
		map[string]any{"ip": "10.0.0.7", "hostname": nil, "lastseen": later},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after restart GET /client/ = %v\nwant %v", got, want)
	}
}
