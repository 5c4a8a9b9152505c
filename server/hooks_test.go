package server

import (
	"context"
	"net/http"

	"github.com/authsrv/authsrv"
)

// ---- Hooks for the API tests (api_test.go). ----

// TestRoute is an extra endpoint a test mounts beside the real routes, to
// exercise the framework (authentication, rights, envelope, recovery).
type TestRoute struct {
	Method, Path string
	// Access is "public", "any" or "admin".
	Access string
	Action string
	Auth   bool
	Fn     func(ctx context.Context, p *Params) (value any, detail map[string]any, err error)
}

// NewWithTestRoutes is New plus the given routes.
func NewWithTestRoutes(s *authsrv.Server, routes ...TestRoute) http.Handler {
	a := newAPI(s)
	for _, r := range routes {
		acc := map[string]access{"public": public, "any": anyRole, "admin": adminRole}[r.Access]
		fn := r.Fn
		a.handle(r.Method, r.Path, endpoint{access: acc, action: r.Action, auth: r.Auth, fn: func(c *call) (answer, error) {
			v, d, err := fn(c.ctx, c.p)
			return answer{value: v, detail: d}, err
		}})
	}
	return a.middleware(a.router)
}

// Route is one registered route.
type Route struct {
	Method, Path, Access, Action string
}

// RoutesOf lists the routes of s (as Routes).
func RoutesOf(s *authsrv.Server) []Route { return Routes(s) }

// Routes lists the routes New registers.
func Routes(s *authsrv.Server) []Route {
	var out []Route
	for _, e := range newAPI(s).endpoints {
		out = append(out, Route{e.method, e.path, e.access.String(), e.action})
	}
	return out
}

// IssueToken signs a JWT as /auth would.
func IssueToken(s *authsrv.Server, username, realm, role string) (string, error) {
	tok, _, err := newAPI(s).issueToken(identity{Username: username, Realm: realm, Role: role, AuthType: "password"})
	return tok, err
}

// ---- End of the API test hooks. ----
