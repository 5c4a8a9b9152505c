package resolvertest_test

import (
	"testing"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

// The in-memory type passes the kit itself, read-only and editable.
func TestMemType(t *testing.T) {
	for _, editable := range []bool{false, true} {
		t.Run(map[bool]string{false: "read-only", true: "editable"}[editable], func(t *testing.T) {
			cfg := resolver.Config{}
			if editable {
				cfg["Editable"] = "True"
			}
			resolvertest.Run(t, func(t *testing.T) resolver.Resolver {
				r, err := resolvertest.MemType().New(t.Context(), cfg, resolver.Env{})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}, resolvertest.Options{Passwords: true, Editable: editable,
				SearchKeys: []string{resolver.KeyEmail, resolver.KeyGivenname, resolver.KeySurname}})
		})
	}
}
