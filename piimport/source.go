package piimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// dialect is the SQL flavour of the source database.
type dialect int

const (
	dialectSQLite dialect = iota
	dialectMySQL
	dialectPostgres
)

func (d dialect) String() string {
	switch d {
	case dialectMySQL:
		return "MySQL"
	case dialectPostgres:
		return "PostgreSQL"
	default:
		return "SQLite"
	}
}

// connectTimeout bounds reaching a MySQL or PostgreSQL server.
const connectTimeout = 15 * time.Second

// DB is an open privacyIDEA database. It is only ever read: SQLite files
// are opened read-only, and MySQL and PostgreSQL are read inside read-only
// transactions.
type DB struct {
	db      *sql.DB
	dialect dialect
	// where names the database in messages: a file path, or the URL
	// without its password.
	where string
}

// String names the database without its password.
func (d *DB) String() string { return d.dialect.String() + " database " + d.where }

// Close closes the connection pool.
func (d *DB) Close() error { return d.db.Close() }

// Open connects to the privacyIDEA database named by source: a SQLAlchemy
// URL as pi.cfg's SQLALCHEMY_DATABASE_URI holds it (sqlite:////abs/path,
// mysql://, mysql+pymysql://user:pw@host:port/db, postgresql://,
// postgresql+psycopg2://, postgres://) or the path of a SQLite file. A
// SQLite file must exist and is opened read-only. Open checks that the
// database answers; it does not check that it is privacyIDEA's (Read
// does). Errors never contain the URL's password.
func Open(ctx context.Context, source string) (*DB, error) {
	source = strings.TrimSpace(source)
	if source == "" {
		return nil, errors.New("no privacyIDEA database given")
	}
	scheme, _, isURL := strings.Cut(source, "://")
	if !isURL {
		return openSQLite(ctx, source)
	}
	base, _, _ := strings.Cut(strings.ToLower(scheme), "+") // the driver part (pymysql, psycopg2, ...) does not matter
	switch base {
	case "sqlite":
		// SQLAlchemy: sqlite:///relative/path, sqlite:////absolute/path;
		// sqlite:// alone is an in-memory database.
		rest := source[len(scheme)+len("://"):]
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			rest = rest[:i]
		}
		path, ok := strings.CutPrefix(rest, "/")
		if !ok || path == "" {
			return nil, errors.New("the sqlite URL names no file (expected sqlite:////absolute/path)")
		}
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
		return openSQLite(ctx, path)
	case "mysql", "mariadb":
		return openMySQL(ctx, source)
	case "postgresql", "postgres", "pgsql":
		return openPostgres(ctx, source)
	default:
		return nil, fmt.Errorf("database URL scheme %q is not supported (sqlite, mysql, postgresql)", scheme)
	}
}

// openSQLite opens an existing SQLite file read-only. The driver would
// create a missing file, so Open looks first.
func openSQLite(ctx context.Context, path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("SQLite database %s: %w", path, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("SQLite database %s does not exist", abs)
		}
		return nil, fmt.Errorf("SQLite database %s: %w", abs, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("SQLite database %s is not a file", abs)
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(abs)
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", "5000")
	db, err := sql.Open("sqlite", "file:"+esc+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("SQLite database %s: %w", abs, err)
	}
	d := &DB{db: db, dialect: dialectSQLite, where: abs}
	if err := d.ping(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// sourceURL parses a MySQL or PostgreSQL URL. The error does not repeat
// the URL (it may hold a password).
func sourceURL(source string) (*url.URL, error) {
	u, err := url.Parse(source)
	if err != nil {
		return nil, errors.New("the database URL cannot be parsed")
	}
	if u.Opaque != "" {
		return nil, errors.New("the database URL must look like scheme://user:password@host:port/database")
	}
	return u, nil
}

func openMySQL(ctx context.Context, source string) (*DB, error) {
	u, err := sourceURL(source)
	if err != nil {
		return nil, err
	}
	c := mysql.NewConfig()
	c.User = u.User.Username()
	c.Passwd, _ = u.User.Password()
	c.DBName = strings.TrimPrefix(u.Path, "/")
	c.Timeout = connectTimeout
	c.ParseTime = false
	c.Net = "tcp"
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "3306"
	}
	c.Addr = net.JoinHostPort(host, port)
	q := u.Query()
	if sock := q.Get("unix_socket"); sock != "" {
		c.Net, c.Addr = "unix", sock
	}
	if q.Get("ssl") == "true" || q.Get("ssl_ca") != "" {
		c.TLSConfig = "true"
	}
	if c.DBName == "" {
		return nil, errors.New("the MySQL URL names no database")
	}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, fmt.Errorf("the MySQL connection settings are invalid: %w", scrub(err, c.Passwd))
	}
	d := &DB{db: sql.OpenDB(conn), dialect: dialectMySQL, where: u.Redacted()}
	if err := d.ping(ctx); err != nil {
		return nil, scrub(err, c.Passwd)
	}
	return d, nil
}

func openPostgres(ctx context.Context, source string) (*DB, error) {
	u, err := sourceURL(source)
	if err != nil {
		return nil, err
	}
	pw, _ := u.User.Password()
	noPW := *u
	noPW.Scheme = "postgres"
	if u.User != nil {
		noPW.User = url.User(u.User.Username())
	}
	q := noPW.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", strconv.Itoa(int(connectTimeout/time.Second)))
	}
	noPW.RawQuery = q.Encode()
	pc, err := pgx.ParseConfig(noPW.String())
	if err != nil {
		// pgx's text repeats the connection string; say only what is wrong.
		return nil, errors.New("the PostgreSQL connection settings are invalid")
	}
	if pw != "" {
		pc.Password = pw
	}
	d := &DB{db: stdlib.OpenDB(*pc), dialect: dialectPostgres, where: u.Redacted()}
	if err := d.ping(ctx); err != nil {
		return nil, scrub(err, pw)
	}
	return d, nil
}

func (d *DB) ping(ctx context.Context) error {
	if err := d.db.PingContext(ctx); err != nil {
		_ = d.db.Close()
		return fmt.Errorf("%s: %w", d, err)
	}
	return nil
}

// scrub makes sure err's text does not contain the password pw, even if a
// driver repeats it.
func scrub(err error, pw string) error {
	if err == nil || pw == "" {
		return err
	}
	return &scrubbedError{err: err, pw: pw}
}

type scrubbedError struct {
	err error
	pw  string
}

func (e *scrubbedError) Error() string {
	s := e.err.Error()
	for _, v := range []string{e.pw, url.QueryEscape(e.pw), url.PathEscape(e.pw)} {
		if v != "" {
			s = strings.ReplaceAll(s, v, "xxxxx")
		}
	}
	return s
}

func (e *scrubbedError) Unwrap() error { return e.err }

// quote returns name as a quoted identifier: privacyIDEA's tables have
// columns named Key (mixed case, so case-sensitive in PostgreSQL),
// default, user and condition, which are reserved words somewhere.
func (d *DB) quote(name string) string {
	if d.dialect == dialectMySQL {
		return "`" + strings.ReplaceAll(name, "`", "``") + "`"
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// sql rewrites a query written with "double-quoted" identifiers for the
// dialect. The queries of this package hold no double quote inside a
// string literal.
func (d *DB) sql(q string) string {
	if d.dialect == dialectMySQL {
		return strings.ReplaceAll(q, `"`, "`")
	}
	return q
}
