package server_test

import (
	"bytes"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/store"
)

// TestNoSecretInAuditStoreOrLog (reliability S1, S2 for what exists): every
// credential-bearing call, in every transport, with its own secret; the
// secret must appear neither in the log (at debug level) nor anywhere in
// the store's bytes (audit entries included), nor a JWT in either.
func TestNoSecretInAuditStoreOrLog(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", "type=memresolver&Editable=True"))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", "resolvers=mem1"))

	var secrets []string
	n := 0
	secret := func() string {
		n++
		s := fmt.Sprintf("Sekr3t-%03d-xq", n)
		secrets = append(secrets, s)
		return s
	}
	q := url.QueryEscape
	hdr := map[string]string{"Authorization": tok}
	cases := []struct {
		name                 string
		method, target, body string
		ctype                string
		hdr                  map[string]string
	}{
		{"auth form", "POST", "/auth", "username=admin&password=" + q(secret()), formType, nil},
		{"auth json", "POST", "/auth", `{"username":"admin","password":"` + secret() + `"}`, "application/json", nil},
		{"auth query", "POST", "/auth?username=admin&password=" + q(secret()), "", "", nil},
		{"auth realm user", "POST", "/auth", "username=alice@realm1&password=" + q(secret()), formType, nil},
		{"auth unknown realm", "POST", "/auth", "username=x&realm=nope&password=" + q(secret()), formType, nil},
		{"resolver secret", "POST", "/resolver/mem2", "type=memresolver&Secret=" + q(secret()), formType, hdr},
		{"resolver secret json", "POST", "/resolver/mem3", `{"type":"memresolver","Secret":"` + secret() + `"}`, "application/json", hdr},
		{"resolver test", "POST", "/resolver/test", "type=memresolver&Secret=" + q(secret()), formType, hdr},
		{"ldap bind password", "POST", "/resolver/ldap9", "type=ldapresolver&LDAPURI=ldap://127.0.0.1:1&LDAPBASE=dc=x&BINDDN=cn=a&BINDPW=" + q(secret()), formType, hdr},
		{"sql password", "POST", "/resolver/sql9", "type=sqlresolver&Driver=postgresql&Server=127.0.0.1&Database=x&User=u&Table=t&Map=" + q(`{"userid":"id","username":"login"}`) + "&Password=" + q(secret()), formType, hdr},
		{"user create", "POST", "/user/", "user=newbie&resolver=mem1&password=" + q(secret()), formType, hdr},
		{"user update", "PUT", "/user/", "user=newbie&resolver=mem1&password=" + q(secret()), formType, hdr},
		{"bearer header", "GET", "/realm/", "", "", map[string]string{"Authorization": "Bearer " + tok}},
		{"pi-authorization header", "GET", "/realm/", "", "", map[string]string{"PI-Authorization": tok}},
		{"bad token", "GET", "/realm/", "", "", map[string]string{"Authorization": secret()}},
		{"policy with a secret-looking value", "POST", "/policy/p1", `{"scope":"admin","action":"*","adminuser":"admin","description":"x"}`, "application/json", hdr},
	}
	for _, tc := range cases {
		e.do(t, tc.method, tc.target, tc.ctype, tc.body, tc.hdr)
	}

	var db bytes.Buffer
	snap, ok := e.s.Store().(store.Snapshotter)
	if !ok {
		t.Fatal("the test store cannot snapshot")
	}
	if _, err := snap.Snapshot(t.Context(), &db); err != nil {
		t.Fatal(err)
	}
	logs := e.log.String()
	if !strings.Contains(logs, `"path":"/auth"`) {
		t.Fatal("nothing was logged")
	}
	if !bytes.Contains(db.Bytes(), []byte("POST /auth")) || !bytes.Contains(db.Bytes(), []byte("POST /resolver/ldap9")) {
		t.Fatal("the audit did not record the calls")
	}
	for _, s := range append(secrets, adminPass, tok) {
		if strings.Contains(logs, s) {
			t.Errorf("secret %q is in the log", s)
		}
		if bytes.Contains(db.Bytes(), []byte(s)) {
			t.Errorf("secret %q is in the store", s)
		}
	}
	jwt := regexp.MustCompile(`eyJ[\w-]+\.eyJ[\w-]+`)
	if jwt.MatchString(logs) || jwt.Match(db.Bytes()) {
		t.Error("a JWT-shaped string was kept")
	}
}
