package token

// staticTypes are the types that need no network.
func staticTypes() []Type { return nil }
