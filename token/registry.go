package token

// builtinTypes lists the token types this package provides.
func builtinTypes() []Type {
	out := []Type{HOTP{}, TOTP{}}
	out = append(out, staticTypes()...)
	return append(out, remoteTypes()...)
}

// DefaultRegistry returns a registry with every built-in type.
func DefaultRegistry() *Registry { return NewRegistry(builtinTypes()...) }

// ChallengesOnPIN reports whether the type name answers a correct PIN
// alone with a challenge (PINChallenger).
func (r *Registry) ChallengesOnPIN(name string) bool {
	t, ok := r.Get(name)
	c, is := t.(PINChallenger)
	return ok && is && c.ChallengesOnPIN()
}

// NeverChallenges reports whether the type name has no challenge
// (NeverChallenger).
func (r *Registry) NeverChallenges(name string) bool {
	t, ok := r.Get(name)
	c, is := t.(NeverChallenger)
	return ok && is && c.NeverChallenges()
}

// ChecksRemotely reports whether the type name forwards its check to
// another server (RemoteChecker).
func (r *Registry) ChecksRemotely(name string) bool {
	t, ok := r.Get(name)
	c, is := t.(RemoteChecker)
	return ok && is && c.ChecksRemotely()
}

// EnrollVia reports whether the type name can be enrolled during an
// authentication (AuthEnroller), and how.
func (r *Registry) EnrollVia(name string) (EnrollVia, bool) {
	t, ok := r.Get(name)
	e, is := t.(AuthEnroller)
	if !ok || !is {
		return EnrollVia{}, false
	}
	return e.EnrollVia(), true
}
