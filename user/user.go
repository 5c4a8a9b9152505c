// Package user owns the user identity (login, realm, resolver, uid), the
// splitting of "login@realm" and "realm\login", and custom user
// attributes: key/value pairs an administrator attaches to a user,
// separate from the attributes in the user store.
//
// Package user sits on floor 2: it imports store and apierr only.
package user

import (
	"strings"
)

// User identifies one user: a login in a realm, resolved to a resolver
// and the uid there. A User whose Resolver or UID is empty has not been
// found (yet).
type User struct {
	Login    string `json:"login"`
	Realm    string `json:"realm"`
	Resolver string `json:"resolver"`
	UID      string `json:"uid"`
}

// Found reports whether the user was resolved to a user store entry.
func (u User) Found() bool { return u.Resolver != "" && u.UID != "" }

// String renders the user as privacyIDEA does in messages:
// <login.resolver@realm>, or <login@realm> when the resolver is unknown.
func (u User) String() string {
	if u.Resolver != "" {
		return "<" + u.Login + "." + u.Resolver + "@" + u.Realm + ">"
	}
	return "<" + u.Login + "@" + u.Realm + ">"
}

// Split separates a realm from a login. "login@realm" is split at the last
// "@" when splitAtSign is on and the part after it is an existing realm;
// otherwise, without an "@", "realm\login" is split at the first backslash
// when the part before it is an existing realm. Anything else is a plain
// login with realm "". Realm names come back lower-cased.
func Split(s string, isRealm func(string) bool, splitAtSign bool) (login, realm string) {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		if splitAtSign && i > 0 && i < len(s)-1 {
			if r := strings.ToLower(s[i+1:]); isRealm(r) {
				return s[:i], r
			}
		}
		return s, ""
	}
	if i := strings.IndexByte(s, '\\'); i > 0 && i < len(s)-1 {
		if r := strings.ToLower(s[:i]); isRealm(r) {
			return s[i+1:], r
		}
	}
	return s, ""
}
