package authsrv

import (
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
)

// DefaultResolverTypes returns the user-store types a Server has unless
// WithResolverTypes replaces them: passwdresolver alone, so that a program
// embedding authsrv links no LDAP or database driver. Its passwd file is
// not confined: an administrator may name any regular file outside /proc,
// /sys and /dev, the data directory's keys included. To confine it, pass
// WithResolverTypes(builtin.Types(builtin.WithFileRoots(dirs...),
// builtin.WithDataDir(dataDir))) (or a registry holding
// passwd.TypeConfined), as the binary does with its -file-root flags; a
// Server given WithFileRoots and no WithResolverTypes confines this
// default passwd type to those roots.
func DefaultResolverTypes() resolver.Registry {
	t := passwd.Type()
	return resolver.Registry{t.Name: t}
}

// defaultResolverTypes is DefaultResolverTypes with the passwd file
// confined when WithFileRoots named roots.
func (c *config) defaultResolverTypes() resolver.Registry {
	types := DefaultResolverTypes()
	if len(c.fileRoots) > 0 {
		t := passwd.TypeConfined(c.files())
		types[t.Name] = t
	}
	return types
}
