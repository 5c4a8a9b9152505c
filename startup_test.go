package authsrv_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/token"
)

// TestReadyWaitsForTheWarmUp: a server whose token list set is built in
// the background (a large store; here the limit is lowered below 0) reports
// ErrWarmingUp until the build is done, then ready; a small store's set is
// built before New returns.
func TestReadyWaitsForTheWarmUp(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("a new small store: Ready = %v", err)
	}
	if _, _, err := s.Tokens().Init(t.Context(), token.InitRequest{Type: "hotp", Serial: "HOTP1",
		Params: token.Params{"otpkey": "3132333435363738393031323334353637383930"}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	release := make(chan struct{})
	restore := authsrv.SetStartUp(-1, func() { <-release })
	defer restore()
	s2 := newServer(t, dir)
	defer s2.Close()
	if err := s2.Ready(t.Context()); !errors.Is(err, authsrv.ErrWarmingUp) {
		t.Fatalf("Ready while the list set builds = %v, want ErrWarmingUp", err)
	}
	rec := httptest.NewRecorder()
	server.New(s2).ServeHTTP(rec, httptest.NewRequest("GET", "/healthz/readyz", nil))
	if want := `{"hsm":"OK","status":"not ready","tokens":"building the list set"}`; rec.Code != 503 || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("readyz while the list set builds: %d %s, want 503 %s", rec.Code, rec.Body, want)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s2.Ready(t.Context())
		if err == nil {
			break
		}
		if !errors.Is(err, authsrv.ErrWarmingUp) || time.Now().After(deadline) {
			t.Fatalf("Ready after the build = %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The set is built: a wildcard list needs no build of its own.
	if _, err := s2.Tokens().List(t.Context(), token.Filter{Serial: "HOTP*"}, "", false, 1, 10); err != nil {
		t.Fatal(err)
	}
}

// TestCloseDuringTheWarmUp: Close does not wait for a warm-up that cannot
// finish, and the server never reports ready.
func TestCloseDuringTheWarmUp(t *testing.T) {
	release := make(chan struct{})
	restore := authsrv.SetStartUp(-1, func() { <-release })
	defer restore()
	s := newServer(t, t.TempDir())
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the warm-up")
	}
	close(release)
	if err := s.Ready(t.Context()); err == nil {
		t.Fatal("a closed server is ready")
	}
}
