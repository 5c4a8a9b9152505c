package token

// remoteTypes are the types that talk to other services or need
// special crypto (email, sms, radius, yubikey).
func remoteTypes() []Type { return []Type{Email{}, SMS{}, RADIUS{}, Yubikey{}} }
