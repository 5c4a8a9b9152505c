package authsrv_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/validate"
)

// clientList renders Ops.ClientApps compactly: "type ip; ...", by type.
func clientList(t *testing.T, s *authsrv.Server) string {
	t.Helper()
	byType, err := s.Ops().ClientApps(t.Context(), caller.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, typ := range []string{"FreeRADIUS", "unknown", "simpleSAMLphp"} {
		for _, c := range byType[typ] {
			rows = append(rows, c.Type+" "+c.IP.String())
		}
		delete(byType, typ)
	}
	for typ := range byType {
		rows = append(rows, "unexpected "+typ)
	}
	return strings.Join(rows, "; ")
}

// TestClientAppsFromGoCallers: a Go program's checks (as the RADIUS
// listener's will be) record their caller like the HTTP ones; Close
// writes what Run did not, so a restart on the data directory lists it.
func TestClientAppsFromGoCallers(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	ctx := t.Context()
	radius := caller.Caller{Role: caller.Anonymous, UserAgent: "FreeRADIUS", Client: netip.MustParseAddr("192.0.2.10")}
	for range 3 {
		// An unknown serial is refused; the client is recorded all the
		// same, as privacyIDEA records every request.
		if _, err := s.Validator().Check(ctx, validate.Request{Serial: "NOPE", Pass: "x", Caller: radius}); err == nil {
			t.Fatal("check of an unknown serial succeeded")
		}
	}
	if _, err := s.Validator().Check(ctx, validate.Request{Serial: "NOPE", Pass: "x"}); err == nil {
		t.Fatal("check of an unknown serial succeeded")
	}
	// Only checks are client applications.
	_, _ = s.Validator().Trigger(ctx, validate.Request{Serial: "NOPE", Caller: caller.Caller{UserAgent: "simpleSAMLphp"}})
	want := "FreeRADIUS 192.0.2.10; unknown 0.0.0.0"
	if got := clientList(t, s); got != want {
		t.Errorf("ClientApps = %q; want %q", got, want)
	}

	// Users may not list them.
	_, err := s.Ops().ClientApps(ctx, caller.Caller{Role: caller.User, Name: "alice", Realm: "realm1"})
	if e, ok := errors.AsType[*apierr.Error](err); !ok || e.Code != apierr.AuthMissingRight {
		t.Errorf("ClientApps as a user = %v; want the admin-only refusal", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newServer(t, dir)
	if got := clientList(t, s2); got != want {
		t.Errorf("after restart ClientApps = %q; want %q", got, want)
	}
}

func TestClientAppOptions(t *testing.T) {
	for name, opt := range map[string]authsrv.Option{
		"zero limit":      authsrv.WithClientAppLimit(0),
		"short retention": authsrv.WithClientAppRetention(time.Minute),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := authsrv.New(authsrv.WithDataDir(t.TempDir()), opt); err == nil || !strings.Contains(err.Error(), "client application") {
				t.Errorf("New = %v; want a client application option error", err)
			}
		})
	}
	s := newServer(t, t.TempDir(), authsrv.WithClientAppLimit(1), authsrv.WithClientAppRetention(48*time.Hour))
	for _, ua := range []string{"a", "b", "c"} {
		_, _ = s.Validator().Check(t.Context(), validate.Request{Serial: "NOPE", Pass: "x", Caller: caller.Caller{UserAgent: ua}})
	}
	if n, d := s.ClientApps().Len(), s.ClientApps().Dropped(); n != 1 || d != 2 {
		t.Errorf("with limit 1: %d kept, %d dropped; want 1, 2", n, d)
	}
}
