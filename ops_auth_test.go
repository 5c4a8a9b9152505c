package authsrv_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
)

// TestLogin: POST /auth's login as a library call: local administrators,
// realm users and superuser realms, each login and each refusal with its
// audit entry, and the auth event around it.
func TestLogin(t *testing.T) {
	rec := &recorder{}
	s := configServer(t, authsrv.WithEventHandler(rec), authsrv.WithSuperuserRealms("realm2"))
	if err := s.Admins().Add(t.Context(), "root", "r00t-pw"); err != nil {
		t.Fatal(err)
	}
	anon := caller.Caller{Role: caller.Anonymous}
	for _, tc := range []struct {
		name string
		req  authsrv.LoginRequest
		want authsrv.Login
		err  string
	}{
		{"local administrator", authsrv.LoginRequest{Username: "root", Password: "r00t-pw"}, authsrv.Login{Name: "root", Role: caller.Admin}, ""},
		{"realm user", authsrv.LoginRequest{Username: "alice", Password: "alice-Pw1", Realm: "realm1"}, authsrv.Login{Name: "alice", Realm: "realm1", Role: caller.User}, ""},
		{"user@realm", authsrv.LoginRequest{Username: "alice@realm1", Password: "alice-Pw1"}, authsrv.Login{Name: "alice", Realm: "realm1", Role: caller.User}, ""},
		{"superuser realm", authsrv.LoginRequest{Username: "alice", Password: "alice-Pw1", Realm: "realm2"}, authsrv.Login{Name: "alice", Realm: "realm2", Role: caller.Admin}, ""},
		{"wrong password", authsrv.LoginRequest{Username: "alice", Password: "nope", Realm: "realm1"}, authsrv.Login{}, authsrv.ErrWrongCredentials.Error()},
		{"wrong admin password", authsrv.LoginRequest{Username: "root", Password: "nope"}, authsrv.Login{}, authsrv.ErrWrongCredentials.Error()},
		{"unknown user", authsrv.LoginRequest{Username: "eve", Password: "x", Realm: "realm1"}, authsrv.Login{}, authsrv.ErrWrongCredentials.Error()},
		{"unknown realm", authsrv.LoginRequest{Username: "alice", Password: "alice-Pw1", Realm: "nowhere"}, authsrv.Login{}, "Unknown realm: nowhere."},
		{"no username", authsrv.LoginRequest{Password: "x"}, authsrv.Login{}, authsrv.ErrMissingUsername.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(auditRows(t, s))
			rec.seen, rec.posts = nil, nil
			got, err := s.Ops().Login(t.Context(), anon, tc.req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			} else {
				// A local administrator's login carries its session stamp,
				// a realm user's none.
				stamp := got.Stamp
				got.Stamp = ""
				if err != nil || got != tc.want || (stamp != "") != (tc.want.Role == caller.Admin && tc.want.Realm == "") {
					t.Fatalf("login = %+v (stamp %q), %v; want %+v", got, stamp, err, tc.want)
				}
			}
			rows := auditRows(t, s)
			if len(rows) != before+1 {
				t.Fatalf("%d audit entries", len(rows)-before)
			}
			last := rows[len(rows)-1]
			success := fmt.Sprint(last["success"]) == "1"
			if last["action"] != "POST /auth" || success != (tc.err == "") || (success && last["authentication"] != "ACCEPT") {
				t.Errorf("audit entry %v", last)
			}
			if fmt.Sprint(rec.seen) != "[pre auth post auth]" {
				t.Errorf("events %v", rec.seen)
			}
		})
	}
}
