package builtin_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/resolver"
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

// WithFileRoots and WithDataDir confine the passwd type of the registry:
// a file beneath a root is accepted, /etc/passwd outside the roots and the
// data directory's key are refused; without options the same /etc/passwd
// is accepted (the unconfined table embedders get).
func TestTypesWithFileRoots(t *testing.T) {
	base := t.TempDir()
	root, data := filepath.Join(base, "root"), filepath.Join(base, "data")
	for _, d := range []string{root, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	inRoot := filepath.Join(root, "users")
	enckey := filepath.Join(data, "enckey")
	for _, f := range []string{inRoot, enckey} {
		if err := os.WriteFile(f, []byte("alice:x:1001:100::/home/alice:/bin/sh\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	confined := builtin.Types(builtin.WithFileRoots(filepath.Join(base, "other")), builtin.WithFileRoots(root), builtin.WithDataDir(data))["passwdresolver"]
	open := builtin.Types()["passwdresolver"]
	cases := []struct {
		name string
		typ  resolver.Type
		path string
		ok   bool
	}{
		{"in a root", confined, inRoot, true},
		{"etc passwd outside the roots", confined, "/etc/passwd", false},
		{"the enckey", confined, enckey, false},
		{"etc passwd unconfined", open, "/etc/passwd", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.typ.Validate(resolver.Config{"filename": tc.path})
			if (err == nil) != tc.ok {
				t.Errorf("Validate(%s) = %v, want ok %v", tc.path, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.path) {
				t.Errorf("the refusal %q does not name the file", err)
			}
		})
	}
}

// The same options confine the LDAP type's TLS_CA_FILE.
func TestTypesConfineLDAPCAFile(t *testing.T) {
	base := t.TempDir()
	root, data := filepath.Join(base, "root"), filepath.Join(base, "data")
	for _, d := range []string{root, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	enckey := filepath.Join(data, "enckey")
	if err := os.WriteFile(enckey, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	typ := builtin.Types(builtin.WithFileRoots(root), builtin.WithDataDir(data))["ldapresolver"]
	cfg := func(file string) resolver.Config {
		return resolver.Config{"LDAPURI": "ldaps://127.0.0.1:1", "LDAPBASE": "dc=x", "LOGINNAMEATTRIBUTE": "uid", "TLS_CA_FILE": file}
	}
	for _, file := range []string{enckey, "/etc/ssl/certs/ca-certificates.crt"} {
		if err := typ.Validate(cfg(file)); err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("Validate(TLS_CA_FILE=%s) = %v; want a refusal naming the file", file, err)
		}
	}
	if err := typ.Validate(cfg(filepath.Join(root, "ca.pem"))); err != nil {
		t.Errorf("Validate(a CA file beneath the root) = %v", err)
	}
}
