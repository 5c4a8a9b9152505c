package builtin_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/authsrv/authsrv/resolver/builtin"
)

// Types offers every shipped user-store type, in a fresh map each time, so
// that a caller that adds its own type changes no other caller's table.
func TestTypes(t *testing.T) {
	a := builtin.Types()
	want := []string{"ldapresolver", "passwdresolver", "scimresolver", "sqlresolver"}
	if got := slices.Sorted(maps.Keys(a)); !slices.Equal(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
	for name, typ := range a {
		if typ.Name != name {
			t.Errorf("%s: type named %q", name, typ.Name)
		}
	}
	delete(a, "ldapresolver")
	if _, ok := builtin.Types()["ldapresolver"]; !ok {
		t.Error("a caller's change to the table reached the next caller")
	}
}
