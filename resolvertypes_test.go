package authsrv_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/resolver/builtin"
)

// A Server offers passwdresolver unless WithResolverTypes gives more: an
// LDAP resolver is refused by default and accepted with builtin.Types.
func TestResolverTypesDefault(t *testing.T) {
	if got := slices.Sorted(maps.Keys(authsrv.DefaultResolverTypes())); !slices.Equal(got, []string{"passwdresolver"}) {
		t.Errorf("DefaultResolverTypes() = %v, want passwdresolver only", got)
	}
	ldapParams := map[string]string{"type": "ldapresolver", "LDAPURI": "ldap://127.0.0.1:1", "LDAPBASE": "dc=example,dc=org",
		"LOGINNAMEATTRIBUTE": "uid", "LDAPSEARCHFILTER": "(objectClass=person)", "USERINFO": `{"username": "uid"}`, "UIDTYPE": "DN"}
	s := newServer(t, t.TempDir())
	if got := s.Resolvers().Types(); !slices.Equal(got, []string{"passwdresolver"}) {
		t.Errorf("Types() = %v", got)
	}
	if _, err := s.Resolvers().Save(t.Context(), "dir", ldapParams); err == nil || !strings.Contains(err.Error(), "resolver type") {
		t.Errorf("an ldapresolver on a server without the LDAP type: %v", err)
	}
	full := newServer(t, t.TempDir(), authsrv.WithResolverTypes(builtin.Types()))
	if _, err := full.Resolvers().Save(t.Context(), "dir", ldapParams); err != nil {
		t.Errorf("with builtin.Types: %v", err)
	}
}
