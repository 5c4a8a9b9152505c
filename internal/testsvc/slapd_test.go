package testsvc_test

import (
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/authsrv/authsrv/internal/testsvc"
)

func TestParseLDIF(t *testing.T) {
	reqs, err := testsvc.ParseLDIF(`# comment
dn: uid=a,dc=example,dc=org
objectClass: top
objectClass: inetOrgPerson
cn: long
  name
sn:: TcO8bGxlcg==
uid: a

dn: uid=b,dc=example,dc=org
changetype: add
uid: b
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || reqs[0].DN != "uid=a,dc=example,dc=org" || reqs[1].DN != "uid=b,dc=example,dc=org" {
		t.Fatalf("records: %+v", reqs)
	}
	got := map[string][]string{}
	for _, a := range reqs[0].Attributes {
		got[a.Type] = a.Vals
	}
	if len(got["objectClass"]) != 2 || got["cn"][0] != "long name" || got["sn"][0] != "Müller" {
		t.Errorf("attributes: %v", got)
	}
	for _, bad := range []string{"uid: a\n", "dn: x\nnocolon\n", "dn: x\nchangetype: delete\n", "dn: x\nsn:: !!\n"} {
		if _, err := testsvc.ParseLDIF(bad); err == nil {
			t.Errorf("ParseLDIF(%q) accepted", bad)
		}
	}
}

func TestSlapd(t *testing.T) {
	start := time.Now()
	s := testsvc.Slapd(t, testsvc.SlapdTLS())
	t.Logf("slapd with TLS ready in %s", time.Since(start))
	s.AddLDIF(t, "dn: uid=u1,"+s.BaseDN+"\nobjectClass: inetOrgPerson\nuid: u1\ncn: U One\nsn: One\nuserPassword: "+testsvc.SSHA("pw ü")+"\n")

	bindAs := func(t *testing.T, c *ldap.Conn, pw string) error {
		t.Helper()
		defer func() { _ = c.Close() }()
		return c.Bind("uid=u1,"+s.BaseDN, pw)
	}
	t.Run("plain", func(t *testing.T) {
		c, err := ldap.DialURL(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if err := bindAs(t, c, "pw ü"); err != nil {
			t.Errorf("bind with the SSHA password: %v", err)
		}
		c, _ = ldap.DialURL(s.URL)
		if err := bindAs(t, c, "pw"); !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			t.Errorf("bind with a wrong password: %v", err)
		}
	})
	t.Run("ldaps", func(t *testing.T) {
		c, err := ldap.DialURL(s.LDAPSURL, ldap.DialWithTLSConfig(s.TLSConfig()))
		if err != nil {
			t.Fatal(err)
		}
		if err := bindAs(t, c, "pw ü"); err != nil {
			t.Error(err)
		}
		if _, err := ldap.DialURL(s.LDAPSURL, ldap.DialWithTLSConfig(&tls.Config{ServerName: "127.0.0.1"})); err == nil {
			t.Error("the self-signed certificate verified without the CA")
		}
	})
	t.Run("starttls", func(t *testing.T) {
		c, err := ldap.DialURL(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StartTLS(s.TLSConfig()); err != nil {
			t.Fatal(err)
		}
		if err := bindAs(t, c, "pw ü"); err != nil {
			t.Error(err)
		}
	})
	t.Run("StopStart", func(t *testing.T) {
		s.Stop(t)
		if s.Running() {
			t.Fatal("Running after Stop")
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), time.Second); err == nil {
			_ = c.Close()
			t.Fatal("the port still accepts after Stop")
		}
		began := time.Now()
		s.Start(t)
		t.Logf("restart took %s", time.Since(began))
		c, err := ldap.DialURL(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if err := bindAs(t, c, "pw ü"); err != nil {
			t.Errorf("after restart: %v", err)
		}
	})
}
