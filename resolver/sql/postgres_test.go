package sql_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

// seedPostgres creates authsrv.users (serial ids, a mixed-case column
// that needs quoting, an inactive user hidden by Where) with the standard
// population on a fresh server.
func seedPostgres(t *testing.T) (*testsvc.PostgresServer, *sql.DB) {
	t.Helper()
	start := time.Now()
	pg := testsvc.Postgres(t)
	t.Logf("postgres ready in %s", time.Since(start).Round(time.Millisecond))
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, s := range []string{
		`CREATE SCHEMA authsrv`,
		`CREATE TABLE authsrv.users (id SERIAL PRIMARY KEY, login VARCHAR(255) NOT NULL, pw TEXT,
			"givenName" TEXT, sn TEXT, mail TEXT, phone TEXT, mobile TEXT, active INTEGER NOT NULL DEFAULT 0)`,
		`INSERT INTO authsrv.users (login, pw, "givenName", active) VALUES ('inactive-ivan', '{SHA}0DPiKuNIrrVmD8IUCuw1hQxNqZc=', 'Ivan', 0)`,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	hashes := mixedHashes(t)
	for _, u := range resolvertest.Users {
		if _, err := db.ExecContext(ctx, `INSERT INTO authsrv.users (login, pw, "givenName", sn, mail, phone, mobile, active) VALUES ($1, $2, $3, $4, $5, $6, $7, 1)`,
			u.Login, hashes[u.Login], u.Givenname, u.Surname, u.Email, u.Phone, u.Mobile); err != nil {
			t.Fatal(err)
		}
	}
	return pg, db
}

func pgConfig(pg *testsvc.PostgresServer) resolver.Config {
	return resolver.Config{
		"Driver":    "postgresql+psycopg2",
		"Server":    pg.Host,
		"Port":      strconv.Itoa(pg.Port),
		"Database":  pg.Database,
		"User":      pg.User,
		"Password":  pg.Password,
		"conParams": "sslmode=disable",
		"Table":     "authsrv.users",
		"Map":       userMap,
		"Where":     "active == 1",
		"Editable":  "1",
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	pg, db := seedPostgres(t)

	t.Run("Conformance", func(t *testing.T) {
		opt := kitOptions
		opt.Editable = true
		resolvertest.Run(t, func(t *testing.T) resolver.Resolver {
			s, err := sqlres.New(t.Context(), pgConfig(pg), resolver.Env{Log: zerolog.Nop(), Now: time.Now, Dial: loopback})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, opt)
	})

	t.Run("Injection", func(t *testing.T) {
		checkInjection(t, open(t, pgConfig(pg)), func() string { return dump(t, db, "authsrv.users") })
	})

	t.Run("Test", func(t *testing.T) {
		ctx := t.Context()
		if v, d := open(t, pgConfig(pg)).Test(ctx); v != 4 || d != "Found 4 users." {
			t.Errorf("Test() = %v, %q", v, d)
		}
		where := pgConfig(pg)
		where["Where"] = "active == 1 and mail like %@example.org and id > 1 and id < 4711"
		if v, d := open(t, where).Test(ctx); v != 4 || d != "Found 4 users." {
			t.Errorf("Test(Where with every operator) = %v, %q", v, d)
		}
		noTable := pgConfig(pg)
		noTable["Table"] = "authsrv.nothing"
		if v, d := open(t, noTable).Test(ctx); v != -1 || d != "Failed to retrieve users." {
			t.Errorf("Test(no table) = %v, %q", v, d)
		}
		wrongPW := pgConfig(pg)
		wrongPW["Password"] = "wrong-" + pg.Password
		s := open(t, wrongPW)
		if v, d := s.Test(ctx); v != -1 || d != "Unable to connect to database." {
			t.Errorf("Test(wrong password) = %v, %q", v, d)
		}
		_, err := s.UserID(ctx, "alice")
		if !errors.Is(err, resolver.ErrUnavailable) {
			t.Errorf("UserID with a wrong password = %v, want ErrUnavailable", err)
		}
		if err != nil && strings.Contains(err.Error(), wrongPW["Password"]) {
			t.Errorf("the error shows the password: %v", err)
		}
	})

	t.Run("UIDTypes", func(t *testing.T) {
		s := open(t, pgConfig(pg))
		// Text uids on an integer column are simply unknown users.
		for _, uid := range []string{"abc", "99999999999999999999", "1.5", "2 ", "0x2"} {
			if _, err := s.User(t.Context(), uid); !errors.Is(err, resolver.ErrNoUser) {
				t.Errorf("User(%q) = %v, want ErrNoUser", uid, err)
			}
		}
	})
}

// TestPostgresDownAndBack stops the server under a live store: calls fail
// fast with ErrUnavailable, and work again once it is back, with the same
// store (F9).
func TestPostgresDownAndBack(t *testing.T) {
	t.Parallel()
	pg, _ := seedPostgres(t)
	cfg := pgConfig(pg)
	s := open(t, cfg)
	ctx := t.Context()
	uid, err := s.UserID(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	start := time.Now()
	pg.Stop(t)
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	calls := map[string]func() error{
		"UserID": func() error { _, err := s.UserID(ctx, "alice"); return err },
		"User":   func() error { _, err := s.User(ctx, uid); return err },
		"Search": func() error { _, err := s.Search(ctx, map[string]string{resolver.KeyUsername: "a*"}); return err },
		"CheckPassword": func() error {
			ok, err := s.CheckPassword(ctx, uid, resolvertest.Users[0].Password)
			if ok {
				return errors.New("ok while down")
			}
			return err
		},
		"Ping":   func() error { return s.Ping(ctx) },
		"Update": func() error { return s.Update(ctx, uid, map[string]string{resolver.KeyPhone: "1"}) },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		t.Logf("%s while down: %s: %v", name, time.Since(start).Round(time.Millisecond), err)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s took %s while the database was down", name, took)
		}
		if !errors.Is(err, resolver.ErrUnavailable) {
			t.Errorf("%s while down = %v, want ErrUnavailable", name, err)
		}
		if err != nil && strings.Contains(err.Error(), pg.Password) {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
	if v, d := s.Test(ctx); v != -1 || d != "Unable to connect to database." {
		t.Errorf("Test() while down = %v, %q", v, d)
	}

	start = time.Now()
	pg.Start(t)
	t.Logf("started in %s", time.Since(start).Round(time.Millisecond))
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after restart: %v", err)
	}
	if got, err := s.UserID(ctx, "alice"); err != nil || got != uid {
		t.Errorf("UserID after restart = %q, %v", got, err)
	}
	if ok, err := s.CheckPassword(ctx, uid, resolvertest.Users[0].Password); !ok || err != nil {
		t.Errorf("CheckPassword after restart = %v, %v", ok, err)
	}
}
