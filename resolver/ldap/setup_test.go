package ldap_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

const (
	peopleDN = "ou=people,dc=example,dc=org"
	svcDN    = "cn=svc,dc=example,dc=org"
	svcPW    = "svc-Secret-4711"
)

// userInfo is the USERINFO of the test configurations.
var userInfo = map[string]string{
	"username": "uid", "givenname": "givenName", "surname": "sn", "email": "mail",
	"phone": "telephoneNumber", "mobile": "mobile", "password": "userPassword",
}

// directory starts slapd and seeds it: the kit's users under ou=people
// (alice with a second mobile number and a uidNumber), a service account
// that may read but not write, an entry of another object class in
// ou=people and an inetOrgPerson outside it.
func directory(t testing.TB, opts ...testsvc.SlapdOption) *testsvc.SlapdServer {
	t.Helper()
	s := testsvc.Slapd(t, opts...)
	var b strings.Builder
	fmt.Fprintf(&b, "dn: %s\nobjectClass: organizationalUnit\nou: people\n\n", peopleDN)
	fmt.Fprintf(&b, "dn: ou=other,dc=example,dc=org\nobjectClass: organizationalUnit\nou: other\n\n")
	fmt.Fprintf(&b, "dn: %s\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: svc\nuserPassword: %s\n\n", svcDN, testsvc.SSHA(svcPW))
	for _, u := range resolvertest.Users {
		fmt.Fprintf(&b, "dn: uid=%s,%s\nobjectClass: inetOrgPerson\nuid: %s\ncn: %s %s\ngivenName: %s\nsn: %s\nmail: %s\ntelephoneNumber: %s\nmobile: %s\nuserPassword: %s\n",
			u.Login, peopleDN, u.Login, u.Givenname, u.Surname, u.Givenname, u.Surname, u.Email, u.Phone, u.Mobile, testsvc.SSHA(u.Password))
		if u.Login == "alice" {
			b.WriteString("mobile: +49170999\nobjectClass: posixAccount\nuidNumber: 1001\ngidNumber: 1000\nhomeDirectory: /home/alice\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "dn: uid=device1,%s\nobjectClass: account\nuid: device1\n\n", peopleDN)
	fmt.Fprintf(&b, "dn: uid=eve,ou=other,dc=example,dc=org\nobjectClass: inetOrgPerson\nuid: eve\ncn: Eve\nsn: Outside\nuserPassword: %s\n", testsvc.SSHA("eve-Pw"))
	s.AddLDIF(t, b.String())
	return s
}

// config is a read-only configuration for s, bound as the service
// account; extra entries replace or add keys.
func config(s *testsvc.SlapdServer, extra ...string) resolver.Config {
	ui, _ := json.Marshal(userInfo)
	cfg := resolver.Config{
		"LDAPURI":            s.URL,
		"LDAPBASE":           peopleDN,
		"BINDDN":             svcDN,
		"BINDPW":             svcPW,
		"LOGINNAMEATTRIBUTE": "uid",
		"LDAPSEARCHFILTER":   "(uid=*)(objectClass=inetOrgPerson)",
		"USERINFO":           string(ui),
		"TIMEOUT":            "5",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i]] = extra[i+1]
	}
	return cfg
}

// editableConfig writes as the rootdn.
func editableConfig(s *testsvc.SlapdServer, extra ...string) resolver.Config {
	return config(s, append([]string{"BINDDN", s.BindDN, "BINDPW", s.BindPW, "EDITABLE", "True",
		"DN_TEMPLATE", "uid=<username>,<basedn>"}, extra...)...)
}

func open(t testing.TB, cfg resolver.Config) *ldapresolver.Store {
	t.Helper()
	r, err := ldapresolver.New(t.Context(), cfg, resolver.Env{Log: zerolog.Nop(), Dial: loopback})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func password(login string) string {
	for _, u := range resolvertest.Users {
		if u.Login == login {
			return u.Password
		}
	}
	return ""
}
