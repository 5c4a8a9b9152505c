package apierr_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
)

func TestTableIsComplete(t *testing.T) {
	seen := map[apierr.Code]bool{}
	for _, c := range apierr.Codes() {
		if seen[c] {
			t.Errorf("code %d listed twice", c)
		}
		seen[c] = true
		r := apierr.Lookup(c)
		if r.Number == 0 || r.Status < 400 || r.Status > 599 || r.Text == "" {
			t.Errorf("code %d has an incomplete row %+v", c, r)
		}
	}
	if apierr.Lookup(apierr.Code(9999)) != apierr.Lookup(apierr.Server) {
		t.Error("an unknown code does not fall back to the server row")
	}
}

// TestPrivacyIDEANumbers pins the numbers and statuses clients depend on.
func TestPrivacyIDEANumbers(t *testing.T) {
	cases := []struct {
		code   apierr.Code
		number int
		status int
	}{
		{apierr.Parameter, 905, 400},
		{apierr.User, 904, 400},
		{apierr.ResourceNotFound, 601, 404},
		{apierr.Policy, 303, 403},
		{apierr.Auth, 403, 401},
		{apierr.AuthWrongCredentials, 4031, 401},
		{apierr.AuthMissingUsername, 4032, 401},
		{apierr.AuthMissingHeader, 4033, 401},
		{apierr.AuthDecoding, 4304, 401},
		{apierr.AuthExpired, 4305, 401},
		{apierr.AuthMissingRight, 4306, 401},
		{apierr.AuthIllegalMethod, 4307, 401},
		{apierr.TokenAdmin, 301, 400},
		{apierr.ConfigAdmin, 302, 400},
		{apierr.Validate, 401, 400},
		{apierr.Resolver, 907, 400},
		{apierr.RealmAttributes, 908, 400},
		{apierr.Server, 903, 500},
		{apierr.StoreWrite, 902, 503},
	}
	for _, tc := range cases {
		r := apierr.Lookup(tc.code)
		if r.Number != tc.number || r.Status != tc.status {
			t.Errorf("code %d: %d/%d, want %d/%d", tc.code, r.Number, r.Status, tc.number, tc.status)
		}
	}
}

func TestWire(t *testing.T) {
	notFound := apierr.New(apierr.ResourceNotFound, "The requested Realm could not be found.")
	cases := []struct {
		name     string
		err      error
		number   int
		status   int
		message  string
		internal bool
	}{
		{"plain", apierr.MissingParameter("serial"), 905, 400, "ERR905: Missing parameter: serial", false},
		{"wrapped twice", fmt.Errorf("realm r1: %w", fmt.Errorf("lookup: %w", notFound)), 601, 404, "ERR601: The requested Realm could not be found.", false},
		{"explicit number", apierr.New(apierr.TokenAdmin, "This action is not possible, since the token is locked").WithNumber(1007), 1007, 400, "ERR1007: This action is not possible, since the token is locked", false},
		{"default text", &apierr.Error{Code: apierr.AuthMissingHeader}, 4033, 401, "ERR4033: Authentication failure. Missing Authorization header.", false},
		{"no code", errors.New("open /var/lib/x: permission denied"), 903, 500, "ERR903: Internal server error.", true},
		{"hidden cause", apierr.New(apierr.Resolver, "The LDAP server is not reachable.").Wrap(errors.New("dial tcp 10.0.0.1:389: timeout")), 907, 400, "ERR907: The LDAP server is not reachable.", false},
		{"busy", apierr.New(apierr.Busy, "The server is busy, please try again later."), 903, http.StatusServiceUnavailable, "ERR903: The server is busy, please try again later.", false},
		{"store write", (&apierr.Error{Code: apierr.StoreWrite}).Wrap(errors.New("write /d/authsrv.db: no space left on device")), 902, http.StatusServiceUnavailable, "ERR902: The server cannot store changes: the data directory has no space left.", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, s, m, _, internal := apierr.Wire(tc.err)
			if n != tc.number || s != tc.status || m != tc.message || internal != tc.internal {
				t.Errorf("Wire = %d %d %q %v; want %d %d %q %v", n, s, m, internal, tc.number, tc.status, tc.message, tc.internal)
			}
			if strings.Contains(m, "10.0.0.1") || strings.Contains(m, "permission denied") {
				t.Error("a hidden cause reached the message")
			}
		})
	}
}

func TestSentinelsAndCopies(t *testing.T) {
	base := apierr.New(apierr.ResourceNotFound, "gone")
	wrapped := fmt.Errorf("x: %w", base)
	if !errors.Is(wrapped, base) || !apierr.Is(wrapped, apierr.ResourceNotFound) || apierr.Is(wrapped, apierr.Parameter) {
		t.Error("sentinel matching broken")
	}
	d := base.WithDetail(map[string]any{"k": 1})
	if base.Detail != nil || d.Detail == nil {
		t.Error("WithDetail changed the sentinel")
	}
	if n := base.WithNumber(42); base.Num != 0 || n.Number() != 42 {
		t.Error("WithNumber changed the sentinel")
	}
	cause := errors.New("cause")
	e := apierr.Newf(apierr.Parameter, "bad %s: %w", "thing", cause)
	if !errors.Is(e, cause) || e.Error() != "bad thing: cause" {
		t.Errorf("Newf: %v", e)
	}
}

// FuzzMessage: any text keeps the ERR<number>: form and never panics.
func FuzzMessage(f *testing.F) {
	f.Add(0, "text")
	f.Add(905, "")
	f.Add(-1, "\x00\xff")
	f.Fuzz(func(t *testing.T, code int, text string) {
		e := &apierr.Error{Code: apierr.Code(code), Text: text}
		n, s, m, _, _ := apierr.Wire(fmt.Errorf("w: %w", e))
		if !strings.HasPrefix(m, fmt.Sprintf("ERR%d: ", n)) || s < 400 || s > 599 {
			t.Fatalf("Wire = %d %d %q", n, s, m)
		}
	})
}
