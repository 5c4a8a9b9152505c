// Package resolver owns the user stores ("resolvers"): the interface every
// store type implements, the registry of types, the resolver definitions in
// the store (with their secrets sealed and censored on read), live
// instances keyed by configuration revision, and the per-resolver user
// cache. Types live in subpackages (resolver/passwd, ldap, sql, scim) and
// run the conformance kit in resolver/resolvertest.
//
// Package resolver sits on floor 2: it imports store, apierr, netguard and
// internal/secret; its types may add outgoing clients (LDAP, SQL, HTTP) but
// never serve HTTP.
package resolver

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
)

// Info is what a user store knows about one user. Values are strings, or
// []string for attributes configured as multi-valued.
type Info map[string]any

// Strings is the info with one string per attribute, as token types read
// it (an e-mail address, a mobile number): the first value of a
// multi-valued attribute; values of other kinds are left out.
func (i Info) Strings() map[string]string {
	out := make(map[string]string, len(i))
	for k, v := range i {
		switch x := v.(type) {
		case string:
			out[k] = x
		case []string:
			if len(x) > 0 {
				out[k] = x[0]
			}
		case []any:
			if len(x) > 0 {
				if s, ok := x[0].(string); ok {
					out[k] = s
				}
			}
		}
	}
	return out
}

// The standard keys of Info (privacyIDEA's names).
const (
	KeyUsername    = "username"
	KeyUserID      = "userid"
	KeyGivenname   = "givenname"
	KeySurname     = "surname"
	KeyEmail       = "email"
	KeyPhone       = "phone"
	KeyMobile      = "mobile"
	KeyDescription = "description"
	// KeyPassword is accepted by writable stores on create and update; it
	// never appears in an Info that a Resolver returns.
	KeyPassword = "password"
)

// String returns a string field of the info ("" when missing); for a list
// it returns the first value.
func (i Info) String(key string) string {
	switch v := i[key].(type) {
	case string:
		return v
	case []string:
		if len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// Errors every type returns (wrap them to add context).
var (
	// ErrNoUser: the login or uid is not in this store.
	ErrNoUser = errors.New("resolver: no such user")
	// ErrSearchKey: a search key this store cannot search by. Callers
	// listing users across resolvers skip such a resolver.
	ErrSearchKey = apierr.New(apierr.Parameter, "The resolver cannot search by this attribute.")
	// ErrNotEditable: the store does not allow writes.
	ErrNotEditable = apierr.New(apierr.Resolver, "The resolver is not editable.")
	// ErrUnavailable: the backend did not answer (down, timed out). The
	// cause is wrapped for the log and never shown to clients.
	ErrUnavailable = apierr.New(apierr.Resolver, "The user store is not available.")
	// ErrConfig: the configuration is invalid; wrap it with the detail.
	ErrConfig = apierr.New(apierr.Resolver, "The resolver configuration is invalid.")
)

// ConfigError returns an error with a specific text that errors.Is
// matches as ErrConfig. (apierr sentinels compare by identity: wrap them
// with fmt.Errorf's %w, never with Error.Wrap, to keep errors.Is working.)
func ConfigError(text string) error {
	return apierr.New(apierr.Resolver, text).Wrap(ErrConfig)
}

// Resolver is one configured user store. Implementations are safe for
// concurrent use, honour ctx deadlines, and never log passwords.
type Resolver interface {
	// UserID returns the uid of a login name, or ErrNoUser.
	UserID(ctx context.Context, login string) (string, error)
	// User returns the info of uid (always with username and userid), or
	// ErrNoUser.
	User(ctx context.Context, uid string) (Info, error)
	// Search lists the users matching every entry of filter (key: an Info
	// key the store can search; value: text where * is a wildcard). An
	// empty filter lists all users, up to the store's size limit. An
	// unknown key gives ErrSearchKey.
	Search(ctx context.Context, filter map[string]string) ([]Info, error)
	// CheckPassword reports whether password is uid's password. A wrong
	// password, an empty one, or an unknown uid is (false, nil); an error
	// means the store could not tell.
	CheckPassword(ctx context.Context, uid, password string) (bool, error)
	// Close releases connections. It is idempotent.
	Close() error
}

// Editor is implemented by stores that can write users.
type Editor interface {
	// Editable reports whether writes are enabled in the configuration.
	Editable() bool
	// Create adds a user from fields (Info keys, plus KeyPassword) and
	// returns its uid. Without Editable it returns ErrNotEditable.
	Create(ctx context.Context, fields map[string]string) (string, error)
	// Update changes the given fields of uid (KeyPassword sets the
	// password).
	Update(ctx context.Context, uid string, fields map[string]string) error
	// Delete removes uid.
	Delete(ctx context.Context, uid string) error
}

// Tester is implemented by stores whose configuration can be tried out
// (POST /resolver/test). value is the type-specific result privacyIDEA
// clients expect (true/false; for SQL the number of users), description a
// short human text without secrets or remote bodies.
type Tester interface {
	Test(ctx context.Context) (value any, description string)
}

// Pinger is implemented by stores behind a connection (LDAP, SQL): Ping
// checks the connection for /healthz/resolversz within ctx.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Fielder is implemented by stores that know which Info keys they map
// (the searchable and writable attributes).
type Fielder interface {
	Fields() []string
}

// Config is a resolver's configuration: parameter name to value, with
// secrets already opened. Types read what they know and ignore the rest.
type Config map[string]string

// ParamType is the type of a configuration parameter.
type ParamType string

// Parameter types. Password parameters are sealed at rest and read back as
// Censored.
const (
	String   ParamType = "string"
	Int      ParamType = "int"
	Bool     ParamType = "bool"
	Password ParamType = "password"
)

// Censored is what reads show instead of a secret; writing it back keeps
// the stored value.
const Censored = "__CENSORED__"

// Param describes one parameter a type knows.
type Param struct {
	Name        string
	Type        ParamType
	Description string
}

// Env is what the service hands a type's constructor.
type Env struct {
	Log zerolog.Logger
	Now func() time.Time
	// Dial is the policy every connection of the store goes through
	// (package netguard); nil is its safe default, which refuses
	// loopback, link-local and private addresses.
	Dial *netguard.Policy
}

// Type is a kind of user store.
type Type struct {
	// Name is the type as the API writes it (e.g. "ldapresolver").
	Name string
	// Params are the parameters the type knows. Unknown parameters are
	// stored as strings; parameters of type Password are sealed.
	Params []Param
	// Validate checks a configuration at save time, without connecting.
	Validate func(cfg Config) error
	// New builds a store from a valid configuration. It may connect
	// lazily; it must not block beyond ctx.
	New func(ctx context.Context, cfg Config, env Env) (Resolver, error)
	// Editable reports whether cfg enables writes (GET /resolver/?editable=1).
	Editable func(cfg Config) bool
	// CacheTimeout is the user cache lifetime cfg asks for (0 disables it).
	CacheTimeout func(cfg Config) time.Duration
	// Preload builds the store when the server starts (Service.Preload)
	// rather than on first use: for stores that load their data up front
	// (passwd), so that readiness waits for the load.
	Preload bool
}

// Constructor adapts a store's typed constructor to Type.New, so that a
// failed construction returns a nil Resolver rather than an interface
// holding a nil store.
func Constructor[T Resolver](f func(context.Context, Config, Env) (T, error)) func(context.Context, Config, Env) (Resolver, error) {
	return func(ctx context.Context, cfg Config, env Env) (Resolver, error) {
		s, err := f(ctx, cfg, env)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Registry maps type names to types. The root package builds it; a Go
// program may add its own types.
type Registry map[string]Type

// ParseBool reads privacyIDEA's boolean parameter values: 1, true, True,
// TRUE (and yes/on) are true.
func ParseBool(v string) bool {
	switch v {
	case "1", "true", "True", "TRUE", "yes", "Yes", "on", "On":
		return true
	}
	return false
}
