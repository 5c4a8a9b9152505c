package authsrv_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver/builtin"
)

// A Server offers passwdresolver unless WithResolverTypes gives more: an
// LDAP resolver is refused by default and accepted with builtin.Types.
func TestResolverTypesDefault(t *testing.T) {
	if got := slices.Sorted(maps.Keys(authsrv.DefaultResolverTypes())); !slices.Equal(got, []string{"passwdresolver"}) {
		t.Errorf("DefaultResolverTypes() = %v, want passwdresolver only", got)
	}
	ldapParams := map[string]string{"type": "ldapresolver", "LDAPURI": "ldap://127.0.0.1:1", "LDAPBASE": "dc=example,dc=org",
		"LOGINNAMEATTRIBUTE": "uid", "LDAPSEARCHFILTER": "(objectClass=person)", "USERINFO": `{"username": "uid"}`, "UIDTYPE": "DN"}
	s := newServer(t, t.TempDir())
	if got := s.Resolvers().Types(); !slices.Equal(got, []string{"passwdresolver"}) {
		t.Errorf("Types() = %v", got)
	}
	if _, err := s.Resolvers().Save(t.Context(), "dir", ldapParams); err == nil || !strings.Contains(err.Error(), "resolver type") {
		t.Errorf("an ldapresolver on a server without the LDAP type: %v", err)
	}
	full := newServer(t, t.TempDir(), authsrv.WithResolverTypes(builtin.Types()))
	if _, err := full.Resolvers().Save(t.Context(), "dir", ldapParams); err != nil {
		t.Errorf("with builtin.Types: %v", err)
	}
}

// TestResolverFileRoots: through the library, a Server given the rooted
// registry refuses /etc/shadow, ../../../etc/passwd and its own enckey
// (directly, through a symlink placed in a root, through ..) as a passwd
// file, with a resolver error that names the file and the rule, and
// serves the users of a file beneath a root or beneath files/.
func TestResolverFileRoots(t *testing.T) {
	base := t.TempDir()
	data, root := filepath.Join(base, "data"), filepath.Join(base, "root")
	files := filepath.Join(data, "files")
	for _, d := range []string{root, files} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s := newServer(t, data, authsrv.WithResolverTypes(builtin.Types(builtin.WithFileRoots(root, files), builtin.WithDataDir(data))))
	enckey := filepath.Join(data, authsrv.EncKeyFile)
	if _, err := os.Stat(enckey); err != nil {
		t.Fatalf("no enckey: %v", err)
	}
	link := filepath.Join(root, "keylink")
	if err := os.Symlink(enckey, link); err != nil {
		t.Fatal(err)
	}
	users := "alice:x:1001:100:Alice,,,,alice@example.org:/home/alice:/bin/sh\n"
	for _, f := range []string{filepath.Join(root, "users"), filepath.Join(files, "users")} {
		if err := os.WriteFile(f, []byte(users), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := "is outside the allowed directories"
	inData := "is in the server's data directory"
	cases := []struct {
		name, path, want string // want "" = saved
	}{
		{"etc shadow", "/etc/shadow", outside},
		{"enckey", enckey, inData},
		{"enckey through a symlink in a root", link, inData},
		{"enckey through ..", filepath.Join(files, "..", authsrv.EncKeyFile), inData},
		{"etc passwd through ..", filepath.Join(root, "../../../../../../../../etc/passwd"), outside},
		{"a file under a root", filepath.Join(root, "users"), ""},
		{"a file under files", filepath.Join(files, "users"), ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("r%d", i)
			_, err := s.Ops().SetResolver(t.Context(), caller.Caller{}, name, map[string]string{"type": "passwdresolver", "fileName": tc.path})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("SetResolver: %v", err)
				}
				if _, _, err := s.Realms().Set(t.Context(), "realm"+name, []realm.Entry{{Name: name}}); err != nil {
					t.Fatal(err)
				}
				u, _, err := s.Realms().Resolve(t.Context(), "alice", "realm"+name)
				if err != nil || u.UID != "1001" || u.Resolver != name {
					t.Errorf("alice: %+v %v", u, err)
				}
				return
			}
			code, _, msg, _, _ := apierr.Wire(err)
			if code != 907 || !strings.Contains(msg, "The file "+tc.path+" "+tc.want) {
				t.Errorf("SetResolver(%s) = %d %q; want ERR907 naming the file and %q", tc.path, code, msg, tc.want)
			}
			if _, ok, _ := s.Resolvers().Get(t.Context(), name); ok {
				t.Error("the refused resolver was saved")
			}
		})
	}
}
