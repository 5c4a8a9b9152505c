package token

// builtinTypes lists the token types this package provides.
func builtinTypes() []Type {
	out := []Type{HOTP{}, TOTP{}}
	out = append(out, staticTypes()...)
	return append(out, remoteTypes()...)
}

// DefaultRegistry returns a registry with every built-in type.
func DefaultRegistry() *Registry { return NewRegistry(builtinTypes()...) }
