package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

const e2ePeople = "ou=people,dc=example,dc=org"

// e2eDirectory starts slapd with the kit's users (the password of each is
// "ldap-" + its kit password, so a test can tell which store answered).
func e2eDirectory(tb testing.TB) *testsvc.SlapdServer {
	tb.Helper()
	s := testsvc.Slapd(tb)
	var b strings.Builder
	fmt.Fprintf(&b, "dn: %s\nobjectClass: organizationalUnit\nou: people\n\n", e2ePeople)
	for _, u := range resolvertest.Users {
		fmt.Fprintf(&b, "dn: uid=%s,%s\nobjectClass: inetOrgPerson\nuid: %s\ncn: %s\nsn: %s\ngivenName: %s\nmail: %s\nuserPassword: %s\n\n",
			u.Login, e2ePeople, u.Login, u.Givenname, u.Surname, u.Givenname, u.Email, testsvc.SSHA("ldap-"+u.Password))
	}
	fmt.Fprintf(&b, "dn: uid=ldaponly,%s\nobjectClass: inetOrgPerson\nuid: ldaponly\ncn: L\nsn: Only\nuserPassword: %s\n\n", e2ePeople, testsvc.SSHA("only-Pw"))
	s.AddLDIF(tb, b.String())
	return s
}

func ldapParams(s *testsvc.SlapdServer, extra ...string) string {
	ui, _ := json.Marshal(map[string]string{"username": "uid", "givenname": "givenName", "surname": "sn", "email": "mail"})
	v := url.Values{
		"type": {"ldapresolver"}, "LDAPURI": {s.URL}, "LDAPBASE": {e2ePeople},
		"BINDDN": {s.BindDN}, "BINDPW": {s.BindPW}, "LOGINNAMEATTRIBUTE": {"uid"},
		"LDAPSEARCHFILTER": {"(uid=*)(objectClass=inetOrgPerson)"}, "USERINFO": {string(ui)},
		"TIMEOUT": {"2"}, "CACHE_TIMEOUT": {"120"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v.Encode()
}

// TestLDAPEndToEnd is the new user's path with a real directory: an LDAP
// resolver through the API, a realm mixing it with another store by
// priority, users listed and logged in, and the health probe following the
// directory down and back up.
func TestLDAPEndToEnd(t *testing.T) {
	dir := e2eDirectory(t)
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)

	wantOK(t, e.admin(t, tok, "POST", "/resolver/ldap1", ldapParams(dir)))
	r := e.admin(t, tok, "GET", "/resolver/", "")
	if strings.Contains(string(r.body), dir.BindPW) || at(r.json, "result.value.ldap1.data.BINDPW") != "__CENSORED__" {
		t.Fatalf("the bind password is not censored: %s", r.body)
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/resolver/test", ldapParams(dir, "BINDPW", "__CENSORED__", "resolver", "ldap1"))); v != true {
		t.Errorf("resolver test with the stored password: %v", v)
	}
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", "type=memresolver"))
	// LDAP first, the in-memory store second.
	wantOK(t, e.admin(t, tok, "POST", "/realm/mixed", `{"resolvers":["ldap1","mem1"],"priority.ldap1":1,"priority.mem1":2}`))

	users := wantOK(t, e.admin(t, tok, "GET", "/user/?realm=mixed", "")).([]any)
	byName := map[string]string{}
	for _, u := range users {
		m := u.(map[string]any)
		byName[m["username"].(string)] = m["resolver"].(string)
	}
	if len(byName) != 5 || byName["alice"] != "ldap1" || byName["ldaponly"] != "ldap1" {
		t.Errorf("users of the mixed realm: %v", byName)
	}
	login := func(user, pw string) int {
		return e.do(t, "POST", "/auth", formType, form("username", user, "password", pw), nil).status
	}
	if st := login("alice@mixed", "ldap-alice-Pw1"); st != 200 {
		t.Errorf("LDAP user login: %d", st)
	}
	if st := login("alice@mixed", "alice-Pw1"); st != 401 {
		t.Errorf("the lower-priority store answered for alice: %d", st)
	}
	// The other order: the in-memory store wins for alice.
	wantOK(t, e.admin(t, tok, "POST", "/realm/mixed", `{"resolvers":["ldap1","mem1"],"priority.ldap1":5,"priority.mem1":2}`))
	if st := login("alice@mixed", "alice-Pw1"); st != 200 {
		t.Errorf("after swapping priorities: %d", st)
	}

	probe := func() (int, string) {
		r := e.do(t, "GET", "/healthz/resolversz", "", "", nil)
		return r.status, strings.TrimSpace(string(r.body))
	}
	if st, body := probe(); st != 200 || body != `{"ldapresolver":{"ldap1":"OK"},"sqlresolver":{},"status":"ready"}` {
		t.Errorf("resolversz up: %d %s", st, body)
	}
	dir.Stop(t)
	e.clk.add(resolver.HealthTTL)
	start := time.Now()
	if st, body := probe(); st != 503 || body != `{"ldapresolver":{"ldap1":"fail"},"sqlresolver":{},"status":"fail"}` {
		t.Errorf("resolversz down: %d %s", st, body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the probe took %s with the directory down", d)
	}
	// Other realms keep working, LDAP users fail cleanly within the timeout.
	if st := login("ldaponly@mixed", "only-Pw"); st != 401 {
		t.Errorf("LDAP down login: %d", st)
	}
	if st := login("bob@mixed", "b0b p w%+&=ä"); st != 200 {
		t.Errorf("a user of the other store while LDAP is down: %d", st)
	}
	dir.Start(t)
	e.clk.add(resolver.HealthTTL)
	if st, body := probe(); st != 200 || !strings.Contains(body, `"ldap1":"OK"`) {
		t.Errorf("resolversz after the restart: %d %s", st, body)
	}
	if st := login("ldaponly@mixed", "only-Pw"); st != 200 {
		t.Errorf("LDAP user after the restart: %d", st)
	}
}

// BenchmarkRealmLookupLDAP resolves a login through a realm to its user
// info, with the per-resolver user cache and without it.
func BenchmarkRealmLookupLDAP(b *testing.B) {
	dir := e2eDirectory(b)
	for _, cache := range []string{"120", "0"} {
		b.Run("cache="+cache, func(b *testing.B) {
			e := newEnvWith(b, nil)
			ctx := context.Background()
			params := map[string]string{}
			for k, v := range mustValues(ldapParams(dir, "CACHE_TIMEOUT", cache)) {
				params[k] = v[0]
			}
			if _, err := e.s.Resolvers().Save(ctx, "ldap1", params); err != nil {
				b.Fatal(err)
			}
			benchLookup(b, e, "ldap1")
		})
	}
}

func mustValues(s string) url.Values { v, _ := url.ParseQuery(s); return v }

// benchLookup measures Resolve + User of alice in a realm holding res.
func benchLookup(b *testing.B, e *env, res string) {
	ctx := context.Background()
	if _, _, err := e.s.Realms().Set(ctx, "r", []realm.Entry{{Name: res}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		u, in, err := e.s.Realms().Resolve(ctx, "alice", "r")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := in.User(ctx, u.UID); err != nil {
			b.Fatal(err)
		}
	}
}
