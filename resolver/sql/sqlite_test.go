package sql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

// userMap is the Map of the test tables.
const userMap = `{"userid":"id","username":"login","password":"pw","givenname":"givenName","surname":"sn","email":"mail","phone":"phone","mobile":"mobile"}`

// mixedHashes stores each standard user's password in another format,
// taken from the independently made fixtures.
func mixedHashes(t testing.TB) map[string]string {
	t.Helper()
	schemes := [][2]string{{"phpass", "ident=H"}, {"bcrypt", "mkpasswd"}, {"sha512crypt", "openssl"}, {"ssha256", "32-byte"}}
	out := map[string]string{}
	for i, u := range resolvertest.Users {
		s := schemes[i%len(schemes)]
		out[u.Login] = fixtureFor(t, s[0], s[1], u.Password)
	}
	return out
}

// seedSQLite creates a SQLite user table in a temp file: the standard
// population (müller's surname as latin-1 bytes, to exercise Encoding),
// plus an inactive user that the Where filter hides. It returns the file.
func seedSQLite(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	stmts := []string{
		`CREATE TABLE users (id INTEGER PRIMARY KEY AUTOINCREMENT, login TEXT NOT NULL, pw TEXT,
			givenName TEXT, sn TEXT, mail TEXT, phone TEXT, mobile TEXT, active INTEGER NOT NULL DEFAULT 0)`,
		`INSERT INTO users (login, pw, givenName, active) VALUES ('inactive-ivan', '{SHA}0DPiKuNIrrVmD8IUCuw1hQxNqZc=', 'Ivan', 0)`,
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	hashes := mixedHashes(t)
	for _, u := range resolvertest.Users {
		var sn any = u.Surname
		if u.Login == "müller" {
			sn = []byte("M\xfcller") // latin-1
		}
		if _, err := db.Exec(`INSERT INTO users (login, pw, givenName, sn, mail, phone, mobile, active) VALUES (?, ?, ?, ?, ?, ?, ?, 1)`,
			u.Login, hashes[u.Login], u.Givenname, sn, u.Email, u.Phone, u.Mobile); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func sqliteConfig(path string, editable bool) resolver.Config {
	cfg := resolver.Config{
		"Driver":   "sqlite+pysqlite",
		"Database": path,
		"Table":    "users",
		"Map":      userMap,
		"Where":    "active == 1",
	}
	if editable {
		cfg["Editable"] = "1"
	}
	return cfg
}

func open(t testing.TB, cfg resolver.Config) *sqlres.Store {
	t.Helper()
	if err := sqlres.Validate(cfg); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	s, err := sqlres.New(context.Background(), cfg, resolver.Env{Log: zerolog.Nop(), Now: time.Now, Dial: loopback})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var kitOptions = resolvertest.Options{
	Passwords:  true,
	SearchKeys: []string{resolver.KeyEmail, resolver.KeyGivenname, resolver.KeySurname, resolver.KeyPhone, resolver.KeyMobile},
}

func TestSQLiteConformance(t *testing.T) {
	for _, editable := range []bool{false, true} {
		name := "ReadOnly"
		if editable {
			name = "Editable"
		}
		t.Run(name, func(t *testing.T) {
			path := seedSQLite(t)
			opt := kitOptions
			opt.Editable = editable
			resolvertest.Run(t, func(t *testing.T) resolver.Resolver {
				s, err := sqlres.New(t.Context(), sqliteConfig(path, editable), resolver.Env{Log: zerolog.Nop(), Now: time.Now})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, opt)
		})
	}
}

func TestSQLiteDetails(t *testing.T) {
	path := seedSQLite(t)
	s := open(t, sqliteConfig(path, true))
	ctx := t.Context()

	t.Run("WhereHidesRows", func(t *testing.T) {
		if _, err := s.UserID(ctx, "inactive-ivan"); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("UserID(inactive) = %v; the Where filter is not applied", err)
		}
		if ok, err := s.CheckPassword(ctx, "1", "admin"); ok || err != nil {
			t.Errorf("CheckPassword(inactive) = %v, %v", ok, err)
		}
	})

	t.Run("InfoHasID", func(t *testing.T) {
		uid, err := s.UserID(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.User(ctx, uid)
		if err != nil {
			t.Fatal(err)
		}
		if info["id"] != uid || info[resolver.KeyUserID] != uid {
			t.Errorf("info id %v userid %v, want %s", info["id"], info[resolver.KeyUserID], uid)
		}
	})

	t.Run("Fields", func(t *testing.T) {
		got := s.Fields()
		want := []string{"email", "givenname", "mobile", "phone", "surname", "userid", "username"}
		if len(got) != len(want) {
			t.Fatalf("Fields() = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("Fields() = %v, want %v", got, want)
			}
		}
	})

	t.Run("SearchByPasswordRefused", func(t *testing.T) {
		if _, err := s.Search(ctx, map[string]string{resolver.KeyPassword: "*"}); !errors.Is(err, resolver.ErrSearchKey) {
			t.Errorf("Search(password) = %v, want ErrSearchKey", err)
		}
	})

	t.Run("Limit", func(t *testing.T) {
		cfg := sqliteConfig(path, false)
		cfg["Limit"] = "2"
		list, err := open(t, cfg).Search(ctx, nil)
		if err != nil || len(list) != 2 {
			t.Errorf("Search with Limit 2 = %d users, %v", len(list), err)
		}
	})

	t.Run("Test", func(t *testing.T) {
		if v, d := s.Test(ctx); v != 4 || d != "Found 4 users." {
			t.Errorf("Test() = %v, %q", v, d)
		}
		bad := sqliteConfig(path, false)
		bad["Table"] = "no_such_table"
		if v, d := open(t, bad).Test(ctx); v != -1 || d != "Failed to retrieve users." {
			t.Errorf("Test(no table) = %v, %q", v, d)
		}
		missing := sqliteConfig(filepath.Join(t.TempDir(), "missing.db"), false)
		if v, d := open(t, missing).Test(ctx); v != -1 || d != "Unable to connect to database." {
			t.Errorf("Test(missing file) = %v, %q", v, d)
		}
		if _, err := os.Stat(missing["Database"]); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Test created the missing database file: %v", err)
		}
	})

	t.Run("FileRenamed", func(t *testing.T) {
		p := seedSQLite(t)
		r := open(t, sqliteConfig(p, false))
		if err := r.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		if err := os.Rename(p, p+".away"); err != nil {
			t.Fatal(err)
		}
		if err := r.Ping(ctx); !errors.Is(err, resolver.ErrUnavailable) {
			t.Errorf("Ping after rename = %v, want ErrUnavailable", err)
		}
		fresh := open(t, sqliteConfig(p, false))
		if _, err := fresh.UserID(ctx, "alice"); !errors.Is(err, resolver.ErrUnavailable) {
			t.Errorf("UserID on a missing file = %v, want ErrUnavailable", err)
		}
		if err := os.Rename(p+".away", p); err != nil {
			t.Fatal(err)
		}
		if err := r.Ping(ctx); err != nil {
			t.Errorf("Ping after the file came back: %v", err)
		}
		if _, err := fresh.UserID(ctx, "alice"); err != nil {
			t.Errorf("UserID after the file came back: %v", err)
		}
	})

	t.Run("Encoding", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "enc.db")
		db, err := sql.Open("sqlite", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`CREATE TABLE enc (id INTEGER PRIMARY KEY, login TEXT, sn BLOB, gn TEXT)`,
			`INSERT INTO enc VALUES (1, 'x', X'A4FC', X'6DC3BC')`, // gn: UTF-8 bytes in a TEXT column
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		_ = db.Close()
		for enc, want := range map[string]string{"": "¤ü", "latin1": "¤ü", "cp1252": "¤ü", "utf-8": "\uFFFD", "latin9": "€ü"} {
			r := open(t, resolver.Config{
				"Driver": "sqlite", "Database": p, "Table": "enc", "Encoding": enc,
				"Map": `{"userid":"id","username":"login","surname":"sn","givenname":"gn"}`,
			})
			info, err := r.User(ctx, "1")
			if err != nil {
				t.Fatal(err)
			}
			if got := info.String(resolver.KeySurname); got != want {
				t.Errorf("Encoding %q: surname %q, want %q", enc, got, want)
			}
			if got := info.String(resolver.KeyGivenname); got != "mü" {
				t.Errorf("Encoding %q: UTF-8 text column read as %q", enc, got)
			}
		}
	})

	t.Run("WritesNeedEditable", func(t *testing.T) {
		ro := open(t, sqliteConfig(path, false))
		if err := ro.Update(ctx, "2", map[string]string{resolver.KeySurname: "x"}); !errors.Is(err, resolver.ErrNotEditable) {
			t.Errorf("Update = %v", err)
		}
		if err := ro.Delete(ctx, "2"); !errors.Is(err, resolver.ErrNotEditable) {
			t.Errorf("Delete = %v", err)
		}
	})

	t.Run("CreateDuplicate", func(t *testing.T) {
		if _, err := s.Create(ctx, map[string]string{resolver.KeyUsername: "alice"}); err == nil {
			t.Error("Create of an existing login succeeded")
		}
		if _, err := s.Create(ctx, map[string]string{resolver.KeyEmail: "x@example.org"}); err == nil {
			t.Error("Create without username succeeded")
		}
	})

	t.Run("UpdateUnknown", func(t *testing.T) {
		if err := s.Update(ctx, "4711", map[string]string{resolver.KeySurname: "x"}); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("Update(unknown) = %v", err)
		}
		if err := s.Delete(ctx, "4711"); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("Delete(unknown) = %v", err)
		}
	})

	t.Run("HashTypeOnWrite", func(t *testing.T) {
		sqlres.SetWriteCosts(t, 8, 1000, 1000)
		for _, kind := range sqlres.HashTypes {
			cfg := sqliteConfig(path, true)
			cfg["Password_Hash_Type"] = kind
			w := open(t, cfg)
			uid, err := w.Create(ctx, map[string]string{resolver.KeyUsername: "hash-" + kind, resolver.KeyPassword: "pw-" + kind})
			if err != nil {
				t.Fatalf("%s: Create: %v", kind, err)
			}
			if ok, err := w.CheckPassword(ctx, uid, "pw-"+kind); !ok || err != nil {
				t.Errorf("%s: CheckPassword = %v, %v", kind, ok, err)
			}
			if err := w.Delete(ctx, uid); err != nil {
				t.Errorf("%s: Delete: %v", kind, err)
			}
		}
	})
}

func fmtAny(v any) string { return fmt.Sprint(v) }
