// Package caller is who asks for an operation: the typed value that every
// library operation receives instead of an HTTP request. HTTP, the RADIUS
// listener, the web UI and Go programs fill it in; the library decides
// rights, policies and the audit entry from it.
//
// Package caller sits on floor 1 and imports nothing of the module.
package caller

import (
	"fmt"
	"net/netip"
)

// Role is what a caller is allowed to be.
type Role string

// Roles. The zero Role is a trusted local administrator (a Go program
// that embeds the library): no rights are checked, but authentication
// policies and the audit always apply.
const (
	Local Role = ""
	Admin Role = "admin"
	User  Role = "user"
	// APIKey is a caller that presented a valid API key (a JWT of role
	// validate).
	APIKey Role = "validate"
	// Anonymous is an untrusted caller without credentials (a client of
	// /validate/check).
	Anonymous Role = "anonymous"
)

// Caller describes who asks and from where.
type Caller struct {
	Role Role
	// Name is the administrator's name or the user's login; Realm is the
	// administrator's realm (empty for a local admin account) or the
	// user's realm.
	Name, Realm string
	// Resolver is a user's user store, when known.
	Resolver string
	// Client is the client's address (the NAS for RADIUS); zero when
	// unknown.
	Client netip.Addr
	// UserAgent is the client's User-Agent ("privacyIDEA-LDAP-Proxy/1.0").
	UserAgent string
	// RequestID ties the audit entry and the log lines of one request.
	RequestID string
	// Action is how the operation was asked for, as the audit's action
	// column shows it ("GET /validate/check"). Empty: the operation's
	// own name (the POST form of its HTTP path).
	Action string
	// Headers and Environment are what policy conditions of type HTTP
	// header and HTTP environment read (HTTP callers only). Environment
	// is called only when a condition reads it, so that a request no
	// such condition looks at does not build it.
	Headers     map[string][]string
	Environment func() map[string]any
	// Data are the request's parameters for policy conditions of type
	// request data (never a password).
	Data map[string]any
}

// Trusted reports whether the caller is the local administrator, for whom
// no admin rights are checked.
func (c Caller) Trusted() bool { return c.Role == Local }

// IsAdmin reports whether the caller acts as an administrator (a local one
// included).
func (c Caller) IsAdmin() bool { return c.Role == Local || c.Role == Admin }

// Env is the caller's environment for policy conditions (empty, never
// nil, when there is none).
func (c Caller) Env() map[string]any {
	if c.Environment == nil {
		return map[string]any{}
	}
	if env := c.Environment(); env != nil {
		return env
	}
	return map[string]any{}
}

// String names the caller for logs.
func (c Caller) String() string {
	switch c.Role {
	case Local:
		return "local"
	case User:
		return fmt.Sprintf("user %s@%s", c.Name, c.Realm)
	default:
		if c.Realm != "" {
			return fmt.Sprintf("%s %s@%s", c.Role, c.Name, c.Realm)
		}
		return fmt.Sprintf("%s %s", c.Role, c.Name)
	}
}
