package authsrv

import (
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
)

// DefaultResolverTypes returns the user-store types a Server has unless
// WithResolverTypes replaces them: passwdresolver alone, so that a program
// embedding authsrv links no LDAP or database driver. The binary registers
// the full set from package resolver/builtin.
func DefaultResolverTypes() resolver.Registry {
	t := passwd.Type()
	return resolver.Registry{t.Name: t}
}
