// Package builtin offers every user-store type authsrv ships (passwd,
// LDAP, SQL and SCIM) as one registry, so that the binary links the
// database and directory drivers while a program that embeds the root
// package with passwd users alone does not.
//
// It sits beside the resolver implementations (floor 2.25) and imports
// only them, package resolver and package fileroot.
package builtin

import (
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/ldap"
	"github.com/authsrv/authsrv/resolver/passwd"
	"github.com/authsrv/authsrv/resolver/scim"
	"github.com/authsrv/authsrv/resolver/sql"
)

// Option changes how Types builds the registry.
type Option func(*settings)

type settings struct {
	files fileroot.Confinement
}

// WithFileRoots confines the files an administrator may name (the passwd
// file, the LDAP TLS_CA_FILE, the SQLite database and the PostgreSQL
// certificate files) to the directory trees roots, so that a resolver
// cannot read /etc/shadow or the server's keys. Repeated, the roots add
// up; without it files may lie anywhere.
func WithFileRoots(roots ...string) Option {
	return func(s *settings) { s.files.Roots = append(s.files.Roots, roots...) }
}

// WithDataDir names the server's data directory, whose files (keys,
// store, control socket) are then never readable through a resolver,
// whatever the roots, except beneath its files subfolder.
func WithDataDir(dir string) Option {
	return func(s *settings) { s.files.DataDir = dir }
}

// Types returns a fresh registry of passwdresolver, ldapresolver,
// sqlresolver and scimresolver, which a caller may extend before passing
// it to authsrv.WithResolverTypes. Without options the files the
// resolvers name are not confined (beyond /proc, /sys and /dev for the
// passwd and CA files); the binary passes WithFileRoots and WithDataDir.
func Types(opts ...Option) resolver.Registry {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	types := resolver.Registry{}
	for _, t := range []resolver.Type{passwd.TypeConfined(s.files), ldap.TypeConfined(s.files), sql.TypeConfined(s.files), scim.Type()} {
		types[t.Name] = t
	}
	return types
}
