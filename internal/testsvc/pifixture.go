package testsvc

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// PrivacyIDEAFixtureDir returns the directory of the privacyIDEA 3.10.2
// fixture the repository keeps for the tests of "authsrv import
// privacyidea" (piimport/testdata/privacyidea-3.10.2: a real privacyIDEA
// database, its encKey and a manifest of what it holds). It is found from
// this file's place in the module, so any checkout works; a missing
// fixture fails tb.
func PrivacyIDEAFixtureDir(tb testing.TB) string {
	tb.Helper()
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("testsvc: cannot locate the module")
	}
	dir := filepath.Join(filepath.Dir(here), "..", "..", "piimport", "testdata", "privacyidea-3.10.2")
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		tb.Fatalf("testsvc: the privacyIDEA fixture is missing: %v", err)
	}
	return filepath.Clean(dir)
}

// LoadPrivacyIDEAFixture copies a privacyIDEA SQLite database (the
// fixture's pi.sqlite, or a copy of it) into a new database of pg: the
// same tables and columns, with the column types privacyIDEA's schema has
// in PostgreSQL (INTEGER -> integer, VARCHAR(n) -> varchar(n), TEXT ->
// text, BOOLEAN -> boolean, DATETIME -> timestamp; mixed-case and reserved
// names quoted as SQLAlchemy quotes them), the primary keys, and every
// row. It returns a postgresql:// URL (with the test role's password) of
// that database, as pi.cfg's SQLALCHEMY_DATABASE_URI would name it. The
// SQLite file is only read.
func LoadPrivacyIDEAFixture(tb testing.TB, pg *PostgresServer, sqlitePath string) (dsn string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	src, err := sql.Open("sqlite", "file:"+sqlitePath+"?mode=ro")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = src.Close() }()

	// A database of its own, created by the superuser over the socket
	// and owned by the test role.
	name := "pifix_" + randomHex(6)
	admin := openPG(tb, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", pg.sockDir(), pg.Port))
	if _, err := admin.ExecContext(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", name, pg.User)); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	_ = admin.Close()

	u := url.URL{
		Scheme:   "postgresql",
		User:     url.UserPassword(pg.User, pg.Password),
		Host:     pg.Host + ":" + strconv.Itoa(pg.Port),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
	dsn = u.String()
	dst := openPG(tb, strings.Replace(dsn, "postgresql://", "postgres://", 1))
	defer func() { _ = dst.Close() }()

	tables, err := sqliteTables(ctx, src)
	if err != nil {
		tb.Fatal(err)
	}
	tx, err := dst.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, t := range tables {
		if err := copyTable(ctx, src, tx, t); err != nil {
			tb.Fatalf("table %s: %v", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return dsn
}

func openPG(tb testing.TB, conn string) *sql.DB {
	tb.Helper()
	c, err := pgx.ParseConfig(conn)
	if err != nil {
		tb.Fatal(err)
	}
	return stdlib.OpenDB(*c)
}

func sqliteTables(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// pgColumn is a column of a copied table.
type pgColumn struct {
	name, typ string
	notNull   bool
	pk        int
}

var varcharType = regexp.MustCompile(`^VARCHAR\((\d+)\)$`)

// pgType maps a SQLite column type of privacyIDEA's schema to PostgreSQL's.
func pgType(t string) (string, error) {
	t = strings.ToUpper(strings.TrimSpace(t))
	if m := varcharType.FindStringSubmatch(t); m != nil {
		return "varchar(" + m[1] + ")", nil
	}
	switch t {
	case "INTEGER":
		return "integer", nil
	case "BIGINT":
		return "bigint", nil
	case "TEXT":
		return "text", nil
	case "BOOLEAN":
		return "boolean", nil
	case "DATETIME":
		return "timestamp", nil
	case "FLOAT":
		return "double precision", nil
	}
	return "", fmt.Errorf("column type %q has no mapping", t)
}

func pgQuote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func copyTable(ctx context.Context, src *sql.DB, dst *sql.Tx, table string) error {
	rows, err := src.QueryContext(ctx, `SELECT name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		return err
	}
	var cols []pgColumn
	for rows.Next() {
		var c pgColumn
		var notNull int
		if err := rows.Scan(&c.name, &c.typ, &notNull, &c.pk); err != nil {
			_ = rows.Close()
			return err
		}
		c.notNull = notNull != 0
		cols = append(cols, c)
	}
	_ = rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	var defs, names, pks []string
	pkByIndex := map[int]string{}
	for _, c := range cols {
		typ, err := pgType(c.typ)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
		def := pgQuote(c.name) + " " + typ
		if c.notNull {
			def += " NOT NULL"
		}
		defs = append(defs, def)
		names = append(names, pgQuote(c.name))
		if c.pk > 0 {
			pkByIndex[c.pk] = pgQuote(c.name)
		}
	}
	for i := 1; i <= len(pkByIndex); i++ {
		pks = append(pks, pkByIndex[i])
	}
	if len(pks) > 0 {
		defs = append(defs, "PRIMARY KEY ("+strings.Join(pks, ", ")+")")
	}
	if _, err := dst.ExecContext(ctx, "CREATE TABLE "+pgQuote(table)+" (\n\t"+strings.Join(defs, ",\n\t")+"\n)"); err != nil {
		return err
	}

	ph := make([]string, len(cols))
	for i := range ph {
		ph[i] = "$" + strconv.Itoa(i+1)
	}
	insert := "INSERT INTO " + pgQuote(table) + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
	data, err := src.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+pgQuote(table))
	if err != nil {
		return err
	}
	defer func() { _ = data.Close() }()
	for data.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := data.Scan(ptrs...); err != nil {
			return err
		}
		for i, c := range cols {
			v, err := pgValue(vals[i], c.typ)
			if err != nil {
				return fmt.Errorf("column %s: %w", c.name, err)
			}
			vals[i] = v
		}
		if _, err := dst.ExecContext(ctx, insert, vals...); err != nil {
			return err
		}
	}
	return data.Err()
}

// pgValue converts a value SQLite returned to what the PostgreSQL column
// takes: SQLite keeps booleans as integers and datetimes as text.
func pgValue(v any, sqliteType string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch strings.ToUpper(sqliteType) {
	case "BOOLEAN":
		switch x := v.(type) {
		case int64:
			return x != 0, nil
		case bool:
			return x, nil
		case string:
			return x == "1" || strings.EqualFold(x, "true"), nil
		}
		return nil, fmt.Errorf("boolean value of type %T", v)
	case "DATETIME":
		switch x := v.(type) {
		case time.Time:
			return x, nil
		case string:
			for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", time.RFC3339Nano} {
				if t, err := time.Parse(layout, x); err == nil {
					return t, nil
				}
			}
			return nil, fmt.Errorf("datetime %q", x)
		}
		return nil, fmt.Errorf("datetime value of type %T", v)
	}
	if b, ok := v.([]byte); ok {
		v = string(b)
	}
	// SQLite does not enforce VARCHAR lengths, PostgreSQL does; privacyIDEA
	// cuts its audit entries to the column sizes there.
	if s, ok := v.(string); ok {
		if m := varcharType.FindStringSubmatch(strings.ToUpper(sqliteType)); m != nil {
			n, _ := strconv.Atoi(m[1])
			if r := []rune(s); len(r) > n {
				return string(r[:n]), nil
			}
		}
	}
	return v, nil
}
