package sql

import (
	"context"
	"crypto/rand"
	stdsql "database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
)

// Store is one configured SQL user store. It is safe for concurrent use;
// the pool reconnects by itself when the database comes back.
type Store struct {
	c   *config
	db  *stdsql.DB
	log zerolog.Logger

	table   string   // quoted, schema-qualified
	keys    []string // mapped Info keys read from rows (no password), sorted
	uidCol  string   // quoted userid column
	userCol string   // quoted username column
	pwCol   string   // quoted password column, "" when unmapped

	closeOnce sync.Once
}

var (
	_ resolver.Resolver = (*Store)(nil)
	_ resolver.Editor   = (*Store)(nil)
	_ resolver.Tester   = (*Store)(nil)
	_ resolver.Pinger   = (*Store)(nil)
	_ resolver.Fielder  = (*Store)(nil)
	_ resolver.Pager    = (*Store)(nil)
)

// fakeHash is checked when the uid is unknown, so that the answer takes
// about as long as for a known user with a salted digest.
var fakeHash = sync.OnceValue(func() string {
	h, _ := hashPassword(DefaultHashType, rand.Text())
	return h
})

// New builds a store from cfg. It does not connect: the first call (or
// Ping) does, so a store can be built while its database is down.
func New(_ context.Context, cfg resolver.Config, env resolver.Env) (*Store, error) {
	c, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	db, err := openDB(c, env.Dial)
	if err != nil {
		return nil, configError("sqlresolver: " + censor(err, c.password).Error())
	}
	d := c.dialect
	s := &Store{
		c:       c,
		db:      db,
		log:     env.Log.With().Str("component", "resolver").Str("resolver_type", TypeName).Logger(),
		table:   d.quote(c.table),
		uidCol:  d.quote(c.columns[resolver.KeyUserID]),
		userCol: d.quote(c.columns[resolver.KeyUsername]),
	}
	if c.schema != "" {
		s.table = d.quote(c.schema) + "." + s.table
	}
	if pw, ok := c.columns[resolver.KeyPassword]; ok {
		s.pwCol = d.quote(pw)
	}
	for _, k := range slices.Sorted(maps.Keys(c.columns)) {
		if k != resolver.KeyPassword {
			s.keys = append(s.keys, k)
		}
	}
	return s, nil
}

// query is a statement under construction: SQL text and its arguments,
// with placeholders numbered for the dialect.
type query struct {
	d    dialect
	sql  strings.Builder
	args []any
}

func (q *query) text(s ...string) *query {
	for _, x := range s {
		q.sql.WriteString(x)
	}
	return q
}

// bind writes a placeholder for v.
func (q *query) bind(v any) *query {
	q.args = append(q.args, v)
	q.sql.WriteString(q.d.arg(len(q.args)))
	return q
}

// like writes "operand LIKE ? ESCAPE '!'" for a pattern from likePattern.
func (q *query) like(operand, pattern string) *query {
	q.text(operand, " LIKE ")
	q.bind(pattern)
	return q.text(" ESCAPE '", string(likeEscape), "'")
}

// where writes the configured Where conditions, each prefixed by " AND ".
func (s *Store) where(q *query) {
	for _, w := range s.c.where {
		q.text(" AND ", s.c.dialect.quote(w.column), " ", w.op, " ")
		q.bind(w.value)
	}
}

func (s *Store) newQuery() *query { return &query{d: s.c.dialect} }

// ctx bounds one call by poolTimeout (privacyIDEA's wait for a pooled
// connection; here the whole call, connecting included).
func (s *Store) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.c.poolTimeout)
}

// selectList is the quoted columns of keys, in order.
func (s *Store) selectList() string {
	cols := make([]string, len(s.keys))
	for i, k := range s.keys {
		cols[i] = s.c.dialect.quote(s.c.columns[k])
	}
	return strings.Join(cols, ", ")
}

// plausible reports whether text can be a value in the database at all:
// valid UTF-8 without NUL (PostgreSQL refuses the others with an error).
func plausible(text string) bool {
	return utf8.ValidString(text) && !strings.ContainsRune(text, 0)
}

// UserID returns the uid of login: a LIKE match with % and _ escaped, so
// case sensitivity is the column's collation, as in privacyIDEA. When
// several rows match, the one spelled exactly like login wins.
func (s *Store) UserID(ctx context.Context, login string) (string, error) {
	if login == "" || !plausible(login) {
		return "", resolver.ErrNoUser
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.newQuery().text("SELECT ", s.uidCol, ", ", s.userCol, " FROM ", s.table, " WHERE ")
	q.like(s.userCol, likeExact(login))
	s.where(q)
	q.text(" LIMIT 20")
	rows, err := s.db.QueryContext(ctx, q.sql.String(), q.args...)
	if err != nil {
		return "", s.lookupErr("user id", err)
	}
	defer func() { _ = rows.Close() }()
	var first string
	found := false
	for rows.Next() {
		var uid, name any
		if err := rows.Scan(&uid, &name); err != nil {
			return "", s.dbErr("user id", err)
		}
		u, n := s.text(uid, false), s.text(name, false)
		if n == login {
			return u, nil
		}
		if !found {
			first, found = u, true
		}
	}
	if err := rows.Err(); err != nil {
		return "", s.lookupErr("user id", err)
	}
	if !found || first == "" {
		return "", resolver.ErrNoUser
	}
	return first, nil
}

// User returns the mapped columns of uid that are not empty (never the
// password), with username and userid always set, plus "id" (the userid
// column's value) as privacyIDEA adds it.
func (s *Store) User(ctx context.Context, uid string) (resolver.Info, error) {
	if uid == "" || !plausible(uid) {
		return nil, resolver.ErrNoUser
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.newQuery().text("SELECT ", s.selectList(), " FROM ", s.table, " WHERE ", s.uidCol, " = ")
	q.bind(uid)
	s.where(q)
	q.text(" LIMIT 1")
	list, err := s.infos(ctx, q)
	if err != nil {
		return nil, s.lookupErr("user", err)
	}
	// The uid must come back as sent: MySQL compares '1abc' = 1 as true.
	if len(list) == 0 || list[0].String(resolver.KeyUserID) != uid {
		return nil, resolver.ErrNoUser
	}
	return list[0], nil
}

// Search lists users matching every filter entry (a Map key; * is the
// only wildcard, runs of * count as one; empty values are skipped), up to
// Limit rows.
func (s *Store) Search(ctx context.Context, filter map[string]string) ([]resolver.Info, error) {
	q, none, err := s.searchQuery(filter, s.selectList())
	if err != nil || none {
		return nil, err
	}
	q.text(" LIMIT ", strconv.Itoa(s.c.limit))
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	list, err := s.infos(ctx, q)
	if err != nil {
		if isDataError(err) {
			return nil, nil
		}
		return nil, s.dbErr("search", err)
	}
	return list, nil
}

// searchQuery is "SELECT cols FROM table WHERE" the filter and the
// configured Where; none reports a filter no stored value can match.
func (s *Store) searchQuery(filter map[string]string, cols string) (q *query, none bool, err error) {
	keys := slices.Sorted(maps.Keys(filter))
	for _, k := range keys {
		if _, ok := s.c.columns[k]; !ok || k == resolver.KeyPassword {
			return nil, false, fmt.Errorf("sqlresolver search by %q: %w", k, resolver.ErrSearchKey)
		}
	}
	q = s.newQuery().text("SELECT ", cols, " FROM ", s.table, " WHERE 1=1")
	for _, k := range keys {
		v := filter[k]
		if v == "" {
			continue
		}
		if !plausible(v) {
			return nil, true, nil // no stored value can match
		}
		q.text(" AND ")
		q.like(s.c.dialect.likeOperand(s.c.dialect.quote(s.c.columns[k])), likePattern(v))
	}
	s.where(q)
	return q, false, nil
}

// SearchPage lists one page of Search's users ordered by the userid
// column (LIMIT/OFFSET, which SQLite, PostgreSQL and MySQL share), without
// the Limit parameter's cap: the page size bounds the rows. One more row
// than the page tells whether more follow; an empty page past the start
// counts the matches.
func (s *Store) SearchPage(ctx context.Context, filter map[string]string, offset, limit int) (resolver.Page, error) {
	q, none, err := s.searchQuery(filter, s.selectList())
	if err != nil {
		return resolver.Page{}, err
	}
	if none {
		return resolver.Page{Total: 0}, nil
	}
	q.text(" ORDER BY ", s.c.dialect.quote(s.c.columns[resolver.KeyUserID]), s.c.dialect.limitOffset(limit+1, offset))
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	list, err := s.infos(ctx, q)
	if err != nil {
		if isDataError(err) {
			return resolver.Page{Total: 0}, nil
		}
		return resolver.Page{}, s.dbErr("search", err)
	}
	p := resolver.Page{Users: list, Total: -1}
	switch {
	case len(list) > limit:
		p.Users, p.More = list[:limit], true
	case len(list) > 0 || offset == 0:
		p.Total = offset + len(list)
	default:
		cq, _, err := s.searchQuery(filter, "COUNT(*)")
		if err != nil {
			return resolver.Page{}, err
		}
		if err := s.db.QueryRowContext(ctx, cq.sql.String(), cq.args...).Scan(&p.Total); err != nil {
			return resolver.Page{}, s.dbErr("count", err)
		}
	}
	return p, nil
}

// infos runs a query that selects selectList and converts its rows.
func (s *Store) infos(ctx context.Context, q *query) ([]resolver.Info, error) {
	rows, err := s.db.QueryContext(ctx, q.sql.String(), q.args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	binary := make([]bool, len(s.keys))
	if types, err := rows.ColumnTypes(); err == nil && len(types) == len(s.keys) {
		for i, t := range types {
			binary[i] = isBinaryType(t.DatabaseTypeName())
		}
	}
	vals := make([]any, len(s.keys))
	ptrs := make([]any, len(s.keys))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []resolver.Info
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		info := resolver.Info{}
		for i, k := range s.keys {
			if v := s.text(vals[i], binary[i]); v != "" || k == resolver.KeyUserID || k == resolver.KeyUsername {
				info[k] = v
			}
		}
		if _, mapped := s.c.columns["id"]; !mapped {
			info["id"] = info[resolver.KeyUserID]
		}
		out = append(out, info)
	}
	return out, rows.Err()
}

// isBinaryType reports whether a column type holds bytes (decoded with
// Encoding) rather than text in the connection's character set.
func isBinaryType(name string) bool {
	n := strings.ToUpper(name)
	return strings.Contains(n, "BLOB") || strings.Contains(n, "BINARY") || n == "BYTEA"
}

// text converts a column value to a string. Bytes from binary columns, and
// bytes that are not UTF-8, are decoded with Encoding; MySQL returns text
// columns as UTF-8 bytes.
func (s *Store) text(v any, binary bool) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		if !binary && utf8.Valid(x) {
			return string(x)
		}
		return s.c.decode(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// CheckPassword verifies password against uid's stored hash (see
// verifyPassword). Without a mapped password column it is always false.
func (s *Store) CheckPassword(ctx context.Context, uid, password string) (bool, error) {
	if password == "" || s.pwCol == "" {
		return false, nil
	}
	stored, found := fakeHash(), false
	if uid != "" && plausible(uid) {
		ctx, cancel := s.ctx(ctx)
		defer cancel()
		q := s.newQuery().text("SELECT ", s.uidCol, ", ", s.pwCol, " FROM ", s.table, " WHERE ", s.uidCol, " = ")
		q.bind(uid)
		s.where(q)
		q.text(" LIMIT 1")
		var gotUID, hash any
		err := s.db.QueryRowContext(ctx, q.sql.String(), q.args...).Scan(&gotUID, &hash)
		switch {
		case err == nil:
			if s.text(gotUID, false) == uid {
				stored, found = s.text(hash, false), true
			}
		case errors.Is(err, stdsql.ErrNoRows), isDataError(err):
		default:
			return false, s.dbErr("password", err)
		}
	}
	ok, why := verifyPassword(stored, password)
	if !found {
		return false, nil
	}
	if why != nil {
		ev := s.log.Debug()
		if errors.Is(why, errHashCost) {
			ev = s.log.Warn()
		}
		ev.Str("uid", uid).Err(why).Msg("password not checked")
	}
	return ok, nil
}

// Close closes the pool; it is idempotent.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.db.Close() })
	return err
}

// Fields returns the mapped Info keys (the password is write-only and not
// listed).
func (s *Store) Fields() []string { return slices.Clone(s.keys) }

// Editable reports whether the configuration enables writes.
func (s *Store) Editable() bool { return s.c.editable }

// Ping checks that the database answers within ctx and poolTimeout; for
// SQLite also that the file is still there.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if s.c.dialect == dialectSQLite {
		if _, err := os.Stat(s.c.database); err != nil {
			return s.dbErr("ping", err)
		}
	}
	if err := s.db.PingContext(ctx); err != nil {
		return s.dbErr("ping", err)
	}
	return nil
}

// Test counts the users (Where applied) for POST /resolver/test:
// (count, "Found N users.") or (-1, a fixed text without driver detail).
func (s *Store) Test(ctx context.Context) (any, string) {
	if err := s.Ping(ctx); err != nil {
		if r, ok := netguard.Refusal(err); ok {
			return -1, "Unable to connect to database: " + r.Error() + "."
		}
		return -1, "Unable to connect to database."
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := s.newQuery().text("SELECT COUNT(*) FROM ", s.table, " WHERE 1=1")
	s.where(q)
	var n int64
	if err := s.db.QueryRowContext(ctx, q.sql.String(), q.args...).Scan(&n); err != nil {
		return -1, "Failed to retrieve users."
	}
	return int(n), fmt.Sprintf("Found %d users.", n)
}

// Create inserts a user from fields (mapped keys; KeyPassword is hashed
// with Password_Hash_Type; other keys are ignored) and returns its uid:
// the userid given, or the one the database assigned.
func (s *Store) Create(ctx context.Context, fields map[string]string) (string, error) {
	if !s.c.editable {
		return "", resolver.ErrNotEditable
	}
	login := fields[resolver.KeyUsername]
	if login == "" {
		return "", apierr.MissingParameter(resolver.KeyUsername)
	}
	if !plausible(login) {
		return "", apierr.New(apierr.Parameter, "The user name contains characters the user store cannot hold.")
	}
	cols, vals, err := s.assignments(fields)
	if err != nil {
		return "", err
	}
	// Set the columns of Where's == conditions, so that the new user is
	// one this resolver sees.
	for _, w := range s.c.where {
		if col := s.c.dialect.quote(w.column); w.op == "=" && !slices.Contains(cols, col) {
			cols, vals = append(cols, col), append(vals, w.value)
		}
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", s.dbErr("create", err)
	}
	defer func() { _ = tx.Rollback() }()

	exists := s.newQuery().text("SELECT 1 FROM ", s.table, " WHERE ")
	exists.like(s.userCol, likeExact(login))
	exists.text(" LIMIT 1")
	var one int
	switch err := tx.QueryRowContext(ctx, exists.sql.String(), exists.args...).Scan(&one); {
	case err == nil:
		return "", apierr.New(apierr.User, "The user already exists in this resolver.")
	case !errors.Is(err, stdsql.ErrNoRows):
		return "", s.dbErr("create", err)
	}

	ins := s.newQuery().text("INSERT INTO ", s.table, " (", strings.Join(cols, ", "), ") VALUES (")
	for i, v := range vals {
		if i > 0 {
			ins.text(", ")
		}
		ins.bind(v)
	}
	ins.text(")")
	if _, err := tx.ExecContext(ctx, ins.sql.String(), ins.args...); err != nil {
		return "", s.dbErr("create", err)
	}

	uid := fields[resolver.KeyUserID]
	if uid == "" {
		sel := s.newQuery().text("SELECT ", s.uidCol, " FROM ", s.table, " WHERE ", s.userCol, " = ")
		sel.bind(login)
		sel.text(" ORDER BY ", s.uidCol, " DESC LIMIT 1")
		var got any
		if err := tx.QueryRowContext(ctx, sel.sql.String(), sel.args...).Scan(&got); err != nil {
			return "", s.dbErr("create", err)
		}
		uid = s.text(got, false)
	}
	if err := tx.Commit(); err != nil {
		return "", s.dbErr("create", err)
	}
	return uid, nil
}

// assignments returns the quoted columns and values for the mapped keys
// in fields, with the password hashed.
func (s *Store) assignments(fields map[string]string) (cols []string, vals []any, err error) {
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		col, ok := s.c.columns[k]
		v := fields[k]
		switch {
		case k == resolver.KeyPassword && s.pwCol == "":
			return nil, nil, apierr.New(apierr.Resolver, "The resolver maps no password column.")
		case !ok:
			continue // not a mapped field (privacyIDEA ignores those too)
		case k == resolver.KeyPassword:
			h, err := hashPassword(s.c.hashType, v)
			if err != nil {
				return nil, nil, configError("sqlresolver: " + err.Error())
			}
			cols, vals = append(cols, s.pwCol), append(vals, h)
		default:
			cols, vals = append(cols, s.c.dialect.quote(col)), append(vals, v)
		}
	}
	return cols, vals, nil
}

// Update sets the mapped fields of uid (KeyPassword sets the password; the
// userid itself is not changed).
func (s *Store) Update(ctx context.Context, uid string, fields map[string]string) error {
	if !s.c.editable {
		return resolver.ErrNotEditable
	}
	fields = maps.Clone(fields)
	delete(fields, resolver.KeyUserID)
	cols, vals, err := s.assignments(fields)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		_, err := s.User(ctx, uid)
		return err
	}
	if uid == "" || !plausible(uid) {
		return resolver.ErrNoUser
	}
	q := s.newQuery().text("UPDATE ", s.table, " SET ")
	for i, col := range cols {
		if i > 0 {
			q.text(", ")
		}
		q.text(col, " = ")
		q.bind(vals[i])
	}
	q.text(" WHERE ", s.uidCol, " = ")
	q.bind(uid)
	s.where(q)
	return s.exec(ctx, "update", q)
}

// Delete removes uid.
func (s *Store) Delete(ctx context.Context, uid string) error {
	if !s.c.editable {
		return resolver.ErrNotEditable
	}
	if uid == "" || !plausible(uid) {
		return resolver.ErrNoUser
	}
	q := s.newQuery().text("DELETE FROM ", s.table, " WHERE ", s.uidCol, " = ")
	q.bind(uid)
	s.where(q)
	return s.exec(ctx, "delete", q)
}

// exec runs a write that must touch at least one row.
func (s *Store) exec(ctx context.Context, op string, q *query) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, q.sql.String(), q.args...)
	if err != nil {
		return s.lookupErr(op, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return resolver.ErrNoUser
	}
	return nil
}

// lookupErr maps a failed lookup by a value: a value the column cannot
// hold (a text uid for an integer column) means no such user.
func (s *Store) lookupErr(op string, err error) error {
	if isDataError(err) {
		return resolver.ErrNoUser
	}
	return s.dbErr(op, err)
}

// dbErr wraps a driver error as ErrUnavailable, with the database
// password censored out of its text.
func (s *Store) dbErr(op string, err error) error {
	return fmt.Errorf("sqlresolver %s: %w: %w", op, resolver.ErrUnavailable, censor(err, s.c.password))
}

// isDataError reports whether err says a bound value does not fit its
// column (PostgreSQL class 22, MySQL's conversion errors), as opposed to
// the database being unreachable.
func isDataError(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return strings.HasPrefix(pe.Code, "22")
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		switch me.Number {
		case 1292, 1366, 1411: // truncated/incorrect value, incorrect string value
			return true
		}
	}
	return false
}

// censoredError hides a secret in a wrapped error's text.
type censoredError struct {
	err    error
	secret string
}

func (e censoredError) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.secret, resolver.Censored)
}

// Is lets errors.Is see through (context.DeadlineExceeded, ...) without
// Unwrap handing out the uncensored text.
func (e censoredError) Is(target error) bool { return errors.Is(e.err, target) }

// censor returns err with secret replaced in its text.
func censor(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return censoredError{err: err, secret: secret}
}
