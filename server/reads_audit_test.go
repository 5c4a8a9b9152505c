package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/authsrv/authsrv/audit"
)

// TestReadsAuditedOnce: every read and configuration test route writes
// exactly one audit entry (the library's, not a second one from the HTTP
// wrapper), whether it is answered or refused for want of a right.
func TestReadsAuditedOnce(t *testing.T) {
	routes := []struct{ method, path, body string }{
		{"GET", "/token/", ""}, {"GET", "/token/?outform=csv", ""}, {"GET", "/token/getserial/123456", ""},
		{"GET", "/token/challenges/", ""}, {"GET", "/user/?realm=nosuchrealm", ""}, {"GET", "/realm/", ""},
		{"GET", "/realm/superuser", ""}, {"GET", "/defaultrealm", ""}, {"GET", "/resolver/", ""},
		{"GET", "/policy/", ""}, {"GET", "/policy/defs", ""}, {"GET", "/policy/export/p.cfg", ""},
		{"GET", "/policy/check?user=a&realm=r&scope=admin&action=enable", ""}, {"GET", "/audit/", ""},
		{"GET", "/audit/a.csv", ""}, {"GET", "/smtpserver/", ""}, {"GET", "/smsgateway/", ""},
		{"GET", "/smsgateway/providers", ""}, {"GET", "/radiusserver/", ""},
		{"POST", "/radiusserver/test_request", `{"identifier":"nosuch","username":"u","password":"p"}`},
		{"POST", "/resolver/test", `{"type":"passwdresolver","fileName":"/nonexistent"}`},
		{"POST", "/smtpserver/send_test_email", `{"identifier":"m","server":"127.0.0.1","port":"1","recipient":"a@example.org","sender":"b@example.org"}`},
		{"GET", "/user/attribute?user=nobody", ""}, {"GET", "/user/editable_attributes/", ""},
		{"GET", "/resolver/passwdresolver/default", ""},
	}
	// These need no right beyond the admin role.
	noRight := map[string]bool{"/realm/": true, "/realm/superuser": true, "/defaultrealm": true,
		"/user/attribute?user=nobody": true, "/user/editable_attributes/": true, "/resolver/passwdresolver/default": true}
	count := func(t *testing.T, e *env) int {
		t.Helper()
		res, err := e.s.Audit().Search(t.Context(), audit.Query{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res.Count
	}
	for _, refused := range []bool{false, true} {
		e := newEnv(t)
		tok := e.login(t)
		if refused {
			// An admin policy for someone else: admin has no right left.
			wantOK(t, e.admin(t, tok, "POST", "/policy/other", `{"scope":"admin","action":"enable","adminuser":"someone"}`))
		}
		for _, r := range routes {
			t.Run(fmt.Sprintf("%s %s refused=%v", r.method, r.path, refused), func(t *testing.T) {
				before := count(t, e)
				got := e.admin(t, tok, r.method, r.path, r.body)
				if after := count(t, e); after != before+1 {
					t.Errorf("%d audit entries written (status %d), want 1", after-before, got.status)
				}
				if refused && !noRight[r.path] && got.status != http.StatusForbidden {
					t.Errorf("status %d without the right, want 403: %s", got.status, got.body)
				}
			})
		}
	}
}
