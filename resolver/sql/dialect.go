package sql

import (
	stdsql "database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/authsrv/authsrv/netguard"
)

// dialect is the SQL flavour of a configured Driver.
type dialect int

const (
	dialectSQLite dialect = iota + 1
	dialectPostgres
	dialectMySQL
)

// parseDriver maps the SQLAlchemy dialect strings privacyIDEA users write
// (sqlite, sqlite+pysqlite, postgresql+psycopg2, mysql+pymysql, ...) to a
// dialect. The part after + names a Python driver and is ignored.
func parseDriver(s string) (dialect, bool) {
	base, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "+")
	switch base {
	case "sqlite", "sqlite3":
		return dialectSQLite, true
	case "postgresql", "postgres", "pgsql":
		return dialectPostgres, true
	case "mysql", "mariadb":
		return dialectMySQL, true
	}
	return 0, false
}

// quote quotes a validated identifier for the dialect.
func (d dialect) quote(ident string) string {
	if d == dialectMySQL {
		return "`" + ident + "`"
	}
	return `"` + ident + `"`
}

// arg returns the placeholder of the n-th (1-based) parameter.
func (d dialect) arg(n int) string {
	if d == dialectPostgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// limitOffset is the clause that cuts a page of rows: LIMIT n OFFSET m,
// the syntax SQLite, PostgreSQL and MySQL share.
func (d dialect) limitOffset(limit, offset int) string {
	return " LIMIT " + strconv.Itoa(limit) + " OFFSET " + strconv.Itoa(offset)
}

// likeOperand is how a column is compared with LIKE: PostgreSQL has no
// LIKE for integer columns, so it compares the text form.
func (d dialect) likeOperand(quotedCol string) string {
	if d == dialectPostgres {
		return "CAST(" + quotedCol + " AS TEXT)"
	}
	return quotedCol
}

// likeEscape is the escape character of every LIKE we build. It is not a
// backslash, which MySQL string literals would need doubled.
const likeEscape = '!'

// likePattern turns search text into a LIKE pattern: the escape
// character, % and _ are escaped, and each run of * becomes one %.
func likePattern(s string) string {
	var b strings.Builder
	star := false
	for _, r := range s {
		if r == '*' {
			if !star {
				b.WriteByte('%')
			}
			star = true
			continue
		}
		star = false
		if r == likeEscape || r == '%' || r == '_' {
			b.WriteRune(likeEscape)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// likeExact escapes text for a LIKE that matches it exactly (modulo the
// collation): * is literal here.
func likeExact(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == likeEscape || r == '%' || r == '_' {
			b.WriteRune(likeEscape)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// openDB builds the connection pool for c. It does not connect. The
// password goes into the driver's config struct, never into a DSN text.
// Every PostgreSQL and MySQL connection (TCP or Unix socket) goes through
// the dial policy.
func openDB(c *config, dial *netguard.Policy) (*stdsql.DB, error) {
	var db *stdsql.DB
	switch c.dialect {
	case dialectSQLite:
		// A file: URI with mode=rw: a missing file is an error, not a new
		// empty database (F9: a renamed file must show as down).
		esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(c.database)
		q := url.Values{}
		q.Set("mode", "rw")
		q.Set("_busy_timeout", strconv.Itoa(int(min(c.poolTimeout, 5*time.Second)/time.Millisecond)))
		var err error
		db, err = stdsql.Open("sqlite", "file:"+esc+"?"+q.Encode())
		if err != nil {
			return nil, err
		}
	case dialectPostgres:
		pc, err := pgConfig(c)
		if err != nil {
			return nil, err
		}
		d := dial.Dialer(pc.ConnectTimeout)
		d.KeepAlive = 5 * time.Minute
		pc.DialFunc = d.DialContext
		db = stdlib.OpenDB(*pc)
	case dialectMySQL:
		mc, err := mysqlConfig(c)
		if err != nil {
			return nil, err
		}
		mc.DialFunc = dial.Dialer(mc.Timeout).DialContext
		conn, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, err
		}
		db = stdsql.OpenDB(conn)
	default:
		return nil, errors.New("no driver")
	}
	db.SetMaxIdleConns(c.poolSize)
	db.SetMaxOpenConns(c.poolSize + poolOverflow)
	db.SetConnMaxLifetime(c.poolRecycle)
	return db, nil
}

// pgConfig builds the pgx configuration: a URL without the password,
// then the password set on the parsed struct.
func pgConfig(c *config) (*pgx.ConnConfig, error) {
	q, err := url.ParseQuery(c.conParams)
	if err != nil {
		return nil, fmt.Errorf("conParams is not a query string (key=value&...)")
	}
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", strconv.Itoa(int(connectTimeout/time.Second)))
	}
	u := url.URL{Scheme: "postgres", Path: "/" + c.database}
	if c.user != "" {
		u.User = url.User(c.user)
	}
	host := c.server
	if strings.HasPrefix(host, "/") {
		q.Set("host", host) // a unix socket directory
		host = ""
	}
	if c.port != 0 {
		if host == "" && q.Get("host") == "" {
			host = "localhost"
		}
		if host != "" {
			host = net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(c.port))
		} else {
			q.Set("port", strconv.Itoa(c.port))
		}
	} else if host != "" && strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	u.Host = host
	u.RawQuery = q.Encode()
	pc, err := pgx.ParseConfig(u.String())
	if err != nil {
		// pgx's text repeats the connection string; say only what is wrong.
		return nil, fmt.Errorf("the PostgreSQL connection settings are invalid")
	}
	if c.password != "" {
		pc.Password = c.password // fallbacks (sslmode=prefer) use it too
	}
	return pc, nil
}

// mysqlConfig builds the go-sql-driver configuration; conParams are read
// through the driver's own DSN parser, the rest is set field by field.
func mysqlConfig(c *config) (*mysql.Config, error) {
	mc := mysql.NewConfig()
	if c.conParams != "" {
		if _, err := url.ParseQuery(c.conParams); err != nil {
			return nil, fmt.Errorf("conParams is not a query string (key=value&...)")
		}
		parsed, err := mysql.ParseDSN("/?" + c.conParams)
		if err != nil {
			return nil, fmt.Errorf("conParams are not valid MySQL connection parameters")
		}
		mc = parsed
	}
	mc.User, mc.Passwd, mc.DBName = c.user, c.password, c.database
	switch {
	case strings.HasPrefix(c.server, "/"):
		mc.Net, mc.Addr = "unix", c.server
	default:
		host := c.server
		if host == "" {
			host = "localhost"
		}
		port := c.port
		if port == 0 {
			port = 3306
		}
		mc.Net, mc.Addr = "tcp", net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))
	}
	if mc.Timeout == 0 {
		mc.Timeout = connectTimeout
	}
	// UPDATE reports matched rows, so an update that changes nothing is
	// not mistaken for a missing user.
	mc.ClientFoundRows = true
	mc.Logger = nopLogger{}
	return mc, nil
}

// nopLogger silences go-sql-driver, which logs to stderr by default.
type nopLogger struct{}

func (nopLogger) Print(...any) {}
