package sql

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/charmap"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/resolver"
)

// TypeName is the type as the API writes it.
const TypeName = "sqlresolver"

// Defaults of the configuration (privacyIDEA's).
const (
	DefaultLimit       = 100
	DefaultPoolSize    = 5
	DefaultPoolTimeout = 10 * time.Second
	DefaultPoolRecycle = 7200 * time.Second
	DefaultHashType    = "SSHA256"
	DefaultEncoding    = "latin1"
)

// connectTimeout bounds opening one connection when conParams sets none.
const connectTimeout = 5 * time.Second

// poolOverflow is how many connections may be open beyond poolSize, as
// SQLAlchemy's default max_overflow allows.
const poolOverflow = 10

// identRE is what a table, schema or column name must match (A8, B4).
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validIdent reports whether s may be used as an identifier.
func validIdent(s string) bool { return len(s) <= 128 && identRE.MatchString(s) }

// hashTypes are the Password_Hash_Type values for writes.
var hashTypes = []string{"SSHA256", "SSHA", "SSHA512", "SHA", "PHPASS", "OTRS", "SHA256CRYPT", "SHA512CRYPT", "MD5CRYPT"}

// Type returns the sqlresolver type for the resolver registry, with files
// (a SQLite database, PostgreSQL certificate files) anywhere; TypeConfined
// confines them.
func Type() resolver.Type {
	return resolver.Type{
		Name:         TypeName,
		Params:       params(),
		Validate:     Validate,
		New:          resolver.Constructor(New),
		Editable:     editable,
		CacheTimeout: cacheTimeout,
	}
}

func params() []resolver.Param {
	p := func(name string, t resolver.ParamType, desc string) resolver.Param {
		return resolver.Param{Name: name, Type: t, Description: desc}
	}
	s, i, b := resolver.String, resolver.Int, resolver.Bool
	return []resolver.Param{
		p("Driver", s, "sqlite, postgresql or mysql (SQLAlchemy names such as mysql+pymysql or postgresql+psycopg2 are accepted)."),
		p("Server", s, "Database host (or a unix socket directory starting with /)."),
		p("Port", i, "Database port."),
		p("Database", s, "Database name; for sqlite the database file."),
		p("User", s, "Database user."),
		p("Password", resolver.Password, "Database password."),
		p("conParams", s, "Extra connection parameters, URL query form (sslmode=require&connect_timeout=3)."),
		p("Table", s, "The user table, optionally schema.table."),
		p("Map", s, `JSON map of user fields to columns; userid and username are required, e.g. {"userid":"id","username":"login","email":"mail","password":"pw"}.`),
		p("Where", s, "Extra filter: col OP value [and col OP value ...], OP one of ==, like, >, <."),
		p("Encoding", s, "Character set of byte columns (default latin1; also utf-8, cp1252, latin9)."),
		p("Limit", i, "The most users a search returns (default 100)."),
		p("Editable", b, "Allow creating, changing and deleting users."),
		p("Password_Hash_Type", s, "Hash for written passwords: "+strings.Join(hashTypes, ", ")+" (default SSHA256)."),
		p("poolSize", i, "Idle connections kept (default 5; up to 10 more may open)."),
		p("poolTimeout", i, "Seconds one call may take, waiting for a connection included (default 10)."),
		p("poolRecycle", i, "Seconds after which a connection is replaced (default 7200)."),
		p("CACHE_TIMEOUT", i, "Seconds users stay in the user cache (default 0: no cache)."),
	}
}

// get reads a parameter by its name, or case-insensitively when that
// spelling is absent (EDITABLE, map, ...).
func get(cfg resolver.Config, name string) string {
	if v, ok := cfg[name]; ok {
		return strings.TrimSpace(v)
	}
	for k, v := range cfg {
		if strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// editable reports whether cfg enables writes (Editable or EDITABLE).
func editable(cfg resolver.Config) bool { return resolver.ParseBool(get(cfg, "Editable")) }

// cacheTimeout reads CACHE_TIMEOUT (default 0: privacyIDEA's SQL resolver
// has no user cache); unreadable values give 0 (Validate refuses them).
func cacheTimeout(cfg resolver.Config) time.Duration {
	n, err := strconv.Atoi(get(cfg, "CACHE_TIMEOUT"))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// Validate checks a configuration without connecting: the driver, the
// identifiers (Table, every Map column, Where columns), the numbers and
// the hash type. All problems are reported together.
func Validate(cfg resolver.Config) error {
	_, err := parseConfig(cfg)
	return err
}

// configError is an ErrConfig-kind error with a specific text that
// errors.Is also finds as resolver.ErrConfig.
func configError(text string) error {
	return apierr.New(apierr.Resolver, text).Wrap(resolver.ErrConfig)
}

// config is a parsed, valid configuration.
type config struct {
	dialect   dialect
	server    string
	port      int
	database  string
	user      string
	password  string
	conParams string

	schema, table string
	columns       map[string]string // Info key -> column
	where         []condition

	encoding string
	decode   func([]byte) string
	limit    int
	editable bool
	hashType string

	poolSize    int
	poolTimeout time.Duration
	poolRecycle time.Duration
}

func parseConfig(cfg resolver.Config) (*config, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	c := &config{
		server:    get(cfg, "Server"),
		database:  get(cfg, "Database"),
		user:      get(cfg, "User"),
		password:  cfg["Password"], // not trimmed: spaces may be part of it
		conParams: get(cfg, "conParams"),
		editable:  editable(cfg),
	}
	if c.password == "" {
		c.password = get(cfg, "Password")
	}

	driver := get(cfg, "Driver")
	if d, ok := parseDriver(driver); ok {
		c.dialect = d
	} else {
		bad("unknown Driver %q: supported are sqlite, postgresql (postgres) and mysql (mariadb), optionally with a SQLAlchemy +driver suffix such as mysql+pymysql", driver)
	}
	if c.dialect == dialectSQLite && c.database == "" {
		bad("Database (the sqlite file) is missing")
	}
	if c.dialect != dialectSQLite && c.database == "" {
		bad("Database is missing")
	}
	if c.dialect == dialectMySQL && allowsAllFiles(c.conParams) {
		bad("conParams allowAllFiles is refused: it lets the database server read any file of this host")
	}

	if v := get(cfg, "Port"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			bad("Port %q is not a port number", v)
		}
		c.port = n
	}

	table := get(cfg, "Table")
	schema, name, dotted := strings.Cut(table, ".")
	if !dotted {
		schema, name = "", table
	}
	switch {
	case table == "":
		bad("Table is missing")
	case (dotted && !validIdent(schema)) || !validIdent(name):
		bad("Table %q is not a valid table name (letters, digits and _, optionally schema.table)", table)
	default:
		c.schema, c.table = schema, name
	}

	cols, err := parseMap(get(cfg, "Map"))
	if err != nil {
		bad("%s", err.Error())
	}
	c.columns = cols

	where, err := parseWhere(get(cfg, "Where"))
	if err != nil {
		bad("%s", err.Error())
	}
	c.where = where

	c.encoding = get(cfg, "Encoding")
	if c.encoding == "" {
		c.encoding = DefaultEncoding
	}
	if dec, ok := decoder(c.encoding); ok {
		c.decode = dec
	} else {
		bad("Encoding %q is not supported (use latin1, utf-8, cp1252 or latin9)", c.encoding)
	}

	num := func(name string, def, lowest int) int {
		v := get(cfg, name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lowest {
			bad("%s %q is not a whole number of at least %d", name, v, lowest)
			return def
		}
		return n
	}
	c.limit = num("Limit", DefaultLimit, 1)
	c.poolSize = num("poolSize", DefaultPoolSize, 1)
	c.poolTimeout = time.Duration(num("poolTimeout", int(DefaultPoolTimeout/time.Second), 1)) * time.Second
	c.poolRecycle = time.Duration(num("poolRecycle", int(DefaultPoolRecycle/time.Second), 0)) * time.Second
	num("CACHE_TIMEOUT", 0, 0)

	c.hashType = strings.ToUpper(get(cfg, "Password_Hash_Type"))
	if c.hashType == "" {
		c.hashType = DefaultHashType
	}
	if !slices.Contains(hashTypes, c.hashType) {
		bad("Password_Hash_Type %q is not supported (use one of %s)", c.hashType, strings.Join(hashTypes, ", "))
	}

	if len(problems) > 0 {
		return nil, configError("sqlresolver: " + strings.Join(problems, "; "))
	}
	return c, nil
}

// parseMap reads Map: a JSON object of Info key to column. privacyIDEA
// reads it as YAML, so a map written with single quotes is accepted too.
func parseMap(text string) (map[string]string, error) {
	if text == "" {
		return nil, fmt.Errorf("the Map is missing")
	}
	var raw map[string]any
	err := json.Unmarshal([]byte(text), &raw)
	if err != nil && strings.Contains(text, "'") && !strings.Contains(text, `"`) {
		err = json.Unmarshal([]byte(strings.ReplaceAll(text, "'", `"`)), &raw)
	}
	if err != nil {
		return nil, fmt.Errorf("the Map is not a JSON object of field names to columns")
	}
	cols := make(map[string]string, len(raw))
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		col, ok := raw[k].(string)
		switch {
		case k == "":
			problems = append(problems, "the Map has an empty field name")
		case !ok:
			problems = append(problems, fmt.Sprintf("the Map column of %q is not a string", k))
		case !validIdent(col):
			problems = append(problems, fmt.Sprintf("the Map column %q of %q is not a valid column name (letters, digits and _)", col, k))
		default:
			cols[k] = col
		}
	}
	for _, k := range []string{resolver.KeyUserID, resolver.KeyUsername} {
		if _, ok := raw[k]; !ok {
			problems = append(problems, fmt.Sprintf("the Map has no %q column", k))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return cols, nil
}

// decoder returns the decoding of byte columns for an Encoding name.
func decoder(name string) (func([]byte) string, bool) {
	n := strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(name))
	switch n {
	case "utf8", "utf8mb4":
		return func(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }, true
	case "latin1", "l1", "iso88591", "iso885911987", "cp819", "8859":
		return latin1, true
	case "cp1252", "windows1252":
		return charmapDecoder(charmap.Windows1252), true
	case "latin9", "iso885915", "l9":
		return charmapDecoder(charmap.ISO8859_15), true
	case "ascii", "usascii":
		return latin1, true
	}
	return nil, false
}

func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

func charmapDecoder(cm *charmap.Charmap) func([]byte) string {
	return func(b []byte) string {
		out, err := cm.NewDecoder().Bytes(b)
		if err != nil {
			return latin1(b)
		}
		return string(out)
	}
}
