// Package builtin offers every user-store type authsrv ships (passwd,
// LDAP, SQL and SCIM) as one registry, so that the binary links the
// database and directory drivers while a program that embeds the root
// package with passwd users alone does not.
//
// It sits beside the resolver implementations (floor 2.25) and imports
// only them and package resolver.
package builtin

import (
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/ldap"
	"github.com/authsrv/authsrv/resolver/passwd"
	"github.com/authsrv/authsrv/resolver/scim"
	"github.com/authsrv/authsrv/resolver/sql"
)

// Types returns a fresh registry of passwdresolver, ldapresolver,
// sqlresolver and scimresolver, which a caller may extend before passing
// it to authsrv.WithResolverTypes.
func Types() resolver.Registry {
	types := resolver.Registry{}
	for _, t := range []resolver.Type{passwd.Type(), ldap.Type(), sql.Type(), scim.Type()} {
		types[t.Name] = t
	}
	return types
}
