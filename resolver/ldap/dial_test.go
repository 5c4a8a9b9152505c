package ldap_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
)

// loopback is the dial policy of the tests, whose servers listen on
// loopback addresses.
var loopback = netguard.MustParse("127.0.0.0/8", "::1/128")

// S8: under the default dial policy (Env.Dial nil) an LDAP server on a
// loopback address, given as an address or as "localhost", is refused
// before any connection; the resolver test names the address and the
// rule, and the listener sees no connection.
func TestDialPolicy(t *testing.T) {
	ln := testsvc.NewCountingListener(t)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, host := range []string{"127.0.0.1", "localhost"} {
		r, err := ldapresolver.New(t.Context(), resolver.Config{
			"LDAPURI": "ldap://" + net.JoinHostPort(host, port), "LDAPBASE": peopleDN, "BINDDN": svcDN, "BINDPW": svcPW,
			"LOGINNAMEATTRIBUTE": "uid", "TIMEOUT": "5",
		}, resolver.Env{})
		if err != nil {
			t.Fatal(err)
		}
		v, desc := r.Test(t.Context())
		if v != false || !strings.HasPrefix(desc, "LDAP connection failed: connection to ") ||
			!strings.HasSuffix(desc, "(loopback); allow it with -allow-dial") {
			t.Errorf("%s: Test = %v, %q", host, v, desc)
		}
		if _, err := r.UserID(t.Context(), "alice"); !errors.Is(err, netguard.ErrRefused) || !errors.Is(err, resolver.ErrUnavailable) {
			t.Errorf("%s: UserID: %v", host, err)
		}
		_ = r.Close()
	}
	if n := ln.Accepted(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
}
