package testsvc_test

import (
	"context"
	"database/sql"
	"net/url"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/authsrv/authsrv/internal/testsvc"
)

func TestPostgres(t *testing.T) {
	start := time.Now()
	pg := testsvc.Postgres(t)
	t.Logf("postgres ready in %s on port %d", time.Since(start).Round(time.Millisecond), pg.Port)

	query := func(dsn string) (string, error) {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return "", err
		}
		defer func() { _ = db.Close() }()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var who string
		err = db.QueryRowContext(ctx, "SELECT current_user || '@' || current_database()").Scan(&who)
		return who, err
	}

	if who, err := query(pg.DSN()); err != nil || who != pg.User+"@"+pg.Database {
		t.Fatalf("query as the test role = %q, %v", who, err)
	}

	wrong, _ := url.Parse(pg.DSN())
	wrong.User = url.UserPassword(pg.User, "wrong")
	if _, err := query(wrong.String()); err == nil {
		t.Error("a wrong password was accepted: password authentication is off")
	}

	pg.Stop(t)
	if _, err := query(pg.DSN()); err == nil {
		t.Fatal("query succeeded while the server was stopped")
	}
	start = time.Now()
	pg.Start(t)
	t.Logf("restart in %s", time.Since(start).Round(time.Millisecond))
	if who, err := query(pg.DSN()); err != nil || who != pg.User+"@"+pg.Database {
		t.Fatalf("query after restart = %q, %v", who, err)
	}
}
