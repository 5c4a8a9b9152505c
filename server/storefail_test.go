package server_test

import (
	"context"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// refusingStore is a store whose commits can be made to fail as a full
// disk makes them fail: nothing of the write is kept, and the write state
// records it (what store/bolt does for a refused commit).
type refusingStore struct {
	store.Store
	health store.WriteHealth
	fail   atomic.Pointer[error]
}

func (s *refusingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if p := s.fail.Load(); p != nil {
		we, _ := s.health.Failed(*p, time.Now())
		return we
	}
	if err := s.Store.Update(ctx, fn); err != nil {
		return err
	}
	s.health.Succeeded(true)
	return nil
}

func (s *refusingStore) WriteHealth() *store.WriteHealth { return &s.health }

func (s *refusingStore) refuse(errno syscall.Errno) {
	var err error = &fs.PathError{Op: "write", Path: "/data/authsrv.db", Err: errno}
	s.fail.Store(&err)
}

// TestStoreWriteFailure is catalogue row F5 in process: while the store
// refuses writes, reads and refusals answer, every change answers ERR902
// with HTTP 503 (its text names a lack of space or an unwritable data
// directory), a correct OTP is never accepted, readyz is 503 with the
// reason, and the log says it once; when writes work again, so does
// everything, and the OTP refused meanwhile is still unused.
func TestStoreWriteFailure(t *testing.T) {
	st := &refusingStore{Store: storetest.Open(t)}
	e := newEnvWith(t, []authsrv.Option{authsrv.WithStore(st)})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "F1", "type", "hotp", "otpkey", rfcKeyHex)))
	check := func(otp string) reply {
		return e.do(t, "POST", "/validate/check", formType, form("serial", "F1", "pass", otp), nil)
	}
	if r := check("755224"); at(r.json, "result.value") != true {
		t.Fatalf("validate before: %d %s", r.status, r.body)
	}
	const (
		noSpace    = "ERR902: The server cannot store changes: the data directory has no space left."
		unwritable = "ERR902: The server cannot store changes: the data directory cannot be written."
	)

	st.refuse(syscall.ENOSPC)
	if r := e.admin(t, tok, "GET", "/token/?serial=F1", ""); r.status != 200 || at(r.json, "result.value.count") != float64(1) {
		t.Errorf("GET /token/ while writes fail: %d %s", r.status, r.body)
	}
	if r := e.admin(t, tok, "GET", "/audit/", ""); r.status != 200 {
		t.Errorf("GET /audit/ while writes fail: %d %s", r.status, r.body)
	}
	if r := e.admin(t, tok, "GET", "/policy/", ""); r.status != 200 {
		t.Errorf("GET /policy/ while writes fail: %d %s", r.status, r.body)
	}
	if r := e.admin(t, "not-a-jwt", "GET", "/token/", ""); r.status != 401 {
		t.Errorf("a refusal while writes fail: %d %s, want its 401", r.status, r.body)
	}
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("serial", "F2", "type", "hotp", "genkey", "1")), 503, 902, noSpace)
	wantError(t, e.admin(t, tok, "POST", "/policy/p1", form("scope", "admin", "action", "enable")), 503, 902, noSpace)
	wantError(t, e.admin(t, tok, "DELETE", "/token/F1", ""), 503, 902, noSpace)
	// A correct OTP and a wrong one: neither can commit (its counter, its
	// fail counter), so neither is answered as a decision.
	wantError(t, check("287082"), 503, 902, noSpace)
	wantError(t, check("000000"), 503, 902, noSpace)
	r := e.do(t, "GET", "/healthz/readyz", "", "", nil)
	if body := strings.TrimSpace(string(r.body)); r.status != 503 || body != `{"hsm":"OK","status":"not ready","store":"store writes failing: no space left on device"}` {
		t.Errorf("readyz while writes fail: %d %s", r.status, body)
	}
	if n := e.s.Audit().Unwritten(); n == 0 {
		t.Error("the reads answered without their entries are not counted")
	}
	logs := e.log.String()
	if n := strings.Count(logs, "store writes failing"); n != 1 {
		t.Errorf("the log says %d times that writes fail, want once", n)
	}
	if !strings.Contains(logs, `"reason":"no space left on device"`) {
		t.Error("the log does not give the operating system's reason")
	}
	if strings.Contains(logs, "internal error") || strings.Contains(logs, "audit write failed") {
		t.Errorf("requests logged the failure one by one:\n%s", logs)
	}

	// Writes work again: the next write ends the failure.
	st.fail.Store(nil)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "F2", "type", "hotp", "genkey", "1")))
	if r := e.do(t, "GET", "/healthz/readyz", "", "", nil); r.status != 200 {
		t.Errorf("readyz after: %d %s", r.status, r.body)
	}
	if n := strings.Count(e.log.String(), "store writes work again"); n != 1 {
		t.Errorf("the log says %d times that writes work again, want once", n)
	}
	if r := check("287082"); at(r.json, "result.value") != true {
		t.Errorf("the OTP refused while writes failed: %d %s, want accepted now", r.status, r.body)
	}

	// An unwritable data directory (an I/O error) has its own text.
	st.refuse(syscall.EIO)
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("serial", "F3", "type", "hotp", "genkey", "1")), 503, 902, unwritable)
	r = e.do(t, "GET", "/healthz/readyz", "", "", nil)
	if body := strings.TrimSpace(string(r.body)); r.status != 503 || !strings.Contains(body, `"store":"store writes failing: input/output error"`) {
		t.Errorf("readyz on an I/O error: %d %s", r.status, body)
	}
}
