package ldap_test

import (
	"fmt"

	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
)

// Validate checks a configuration when it is saved, without connecting.
func ExampleValidate() {
	cfg := resolver.Config{
		"LDAPURI":            "ldaps://ldap1.example.org, ldaps://ldap2.example.org",
		"LDAPBASE":           "ou=people,dc=example,dc=org",
		"BINDDN":             "cn=authsrv,dc=example,dc=org",
		"BINDPW":             "secret",
		"LOGINNAMEATTRIBUTE": "uid",
		"USERINFO":           `{"givenname":"givenName","surname":"sn","email":"mail"}`,
	}
	fmt.Println(ldapresolver.Validate(cfg))
	cfg["AUTHTYPE"] = "NTLM"
	fmt.Println(ldapresolver.Validate(cfg))
	cfg["AUTHTYPE"], cfg["LDAPURI"] = "Simple", "http://ldap.example.org"
	fmt.Println(ldapresolver.Validate(cfg))
	// Output:
	// <nil>
	// AUTHTYPE "NTLM" is not supported.
	// LDAPURI "http://ldap.example.org": the scheme must be ldap or ldaps.
}
