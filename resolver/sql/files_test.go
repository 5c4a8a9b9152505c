package sql_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/resolver"
	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

// TestFilesConfined is catalogue B7 for the SQL resolver's files: under
// TypeConfined a SQLite Database that is the data directory's enckey, a
// symlink pointing outside the roots, /etc/shadow or a .. traversal, and
// a PostgreSQL sslkey naming the enckey, are refused at save and at build
// with a text that names the rule; a database beneath a root works.
// MySQL's allowAllFiles is refused whatever the confinement.
func TestFilesConfined(t *testing.T) {
	base := t.TempDir()
	root, data := filepath.Join(base, "root"), filepath.Join(base, "data")
	for _, d := range []string{root, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	good := seedSQLite(t)
	inRoot := filepath.Join(root, "users.db")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	enckey, outside := filepath.Join(data, "enckey"), filepath.Join(base, "outside.db")
	for f, body := range map[string][]byte{inRoot: b, enckey: []byte("key"), outside: b} {
		if err := os.WriteFile(f, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link.db")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	typ := sqlres.TypeConfined(fileroot.Confinement{Roots: []string{root}, DataDir: data})
	dotdot := root + "/../outside.db"
	pg := func(conParams string) resolver.Config {
		return resolver.Config{"Driver": "postgresql", "Server": "127.0.0.1", "Database": "users", "Table": "users",
			"Map": `{"username": "login", "userid": "id"}`, "conParams": conParams}
	}
	cases := []struct {
		name string
		cfg  resolver.Config
		rule string // "" = accepted
	}{
		{"sqlite beneath a root", sqliteConfig(inRoot, false), ""},
		{"sqlite enckey", sqliteConfig(enckey, false), "Database is refused: The file " + enckey + " is in the server's data directory"},
		{"sqlite symlink pointing outside", sqliteConfig(link, false), link + " is outside the allowed directories"},
		{"sqlite etc shadow", sqliteConfig("/etc/shadow", false), "/etc/shadow is outside the allowed directories"},
		{"sqlite .. traversal", sqliteConfig(dotdot, false), dotdot + " is outside the allowed directories"},
		{"postgres sslkey enckey", pg("sslmode=require&sslkey=" + enckey), "conParams sslkey is refused: The file " + enckey + " is in the server's data directory"},
		{"postgres sslrootcert etc shadow", pg("sslmode=verify-full&sslrootcert=/etc/shadow"), "conParams sslrootcert is refused"},
		{"postgres passfile through ..", pg("passfile=" + dotdot), "conParams passfile is refused"},
		{"postgres sslrootcert system", pg("sslmode=verify-full&sslrootcert=system"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := typ.Validate(tc.cfg)
			r, nerr := typ.New(t.Context(), tc.cfg, resolver.Env{})
			if r != nil {
				defer r.Close()
			}
			if tc.rule == "" {
				if err != nil || nerr != nil {
					t.Fatalf("Validate: %v, New: %v", err, nerr)
				}
				return
			}
			for what, e := range map[string]error{"Validate": err, "New": nerr} {
				if !errors.Is(e, resolver.ErrConfig) || !strings.Contains(e.Error(), tc.rule) {
					t.Errorf("%s: %v; want ErrConfig naming %q", what, e, tc.rule)
				}
			}
		})
	}
	if r, err := typ.New(t.Context(), sqliteConfig(inRoot, false), resolver.Env{}); err != nil {
		t.Fatal(err)
	} else {
		defer r.Close()
		if uid, err := r.UserID(t.Context(), "alice"); err != nil || uid == "" {
			t.Errorf("UserID(alice) from a database beneath the root: %q, %v", uid, err)
		}
	}

	my := resolver.Config{"Driver": "mysql", "Server": "127.0.0.1", "Database": "users", "Table": "users",
		"Map": `{"username": "login", "userid": "id"}`}
	for _, v := range []string{"true", "1", "TRUE"} {
		my["conParams"] = "allowAllFiles=" + v
		for name, typ := range map[string]resolver.Type{"Type": sqlres.Type(), "TypeConfined": typ} {
			if err := typ.Validate(my); !errors.Is(err, resolver.ErrConfig) || !strings.Contains(err.Error(), "allowAllFiles is refused") {
				t.Errorf("%s: allowAllFiles=%s: %v", name, v, err)
			}
		}
	}
	my["conParams"] = "allowAllFiles=false"
	if err := typ.Validate(my); err != nil {
		t.Errorf("allowAllFiles=false: %v", err)
	}
}
