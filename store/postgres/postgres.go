// Package postgres is a store.Store on PostgreSQL, through pgx, for several
// authsrv nodes that share one database.
//
// All buckets live in one table of (bucket, key, value) rows ordered by
// key (bytea compares bytewise, as bbolt does), and the bucket sequences in
// a second table; Open creates and migrates both, under an advisory lock,
// so that nodes starting together do not race. A third table holds the
// schema version: a node refuses a database that a newer release has
// migrated.
//
// Update groups concurrent calls into one commit, as store/bolt does:
// while one batch runs, the calls that arrive queue, and the next batch
// runs their functions one after the other in one SERIALIZABLE
// transaction, each in a savepoint of its own, then the PreCommit hooks
// once, and commits (see batch.go). A function that fails is rolled back
// alone and gets its error; the others commit. The writers of a hot row
// on one node (the audit chain's head, which every request writes) thus
// share a commit instead of failing each other. When PostgreSQL reports a
// serialization failure or a deadlock (another node won), the batch runs
// again after a short random wait: the store's rule that an Update
// function may run more than once is what makes that correct. The
// transaction reads through to the database, so a function sees its own
// writes and those of the functions before it in its batch. A function's
// savepoint, and a View's BEGIN, travel in one round trip with its first
// statement. View runs in one REPEATABLE READ, READ ONLY transaction: one
// consistent snapshot, taken at its first statement (as PostgreSQL
// does).
//
// Every statement is bounded by Options.QueryTimeout, on the client and
// on the server, so that a database that stops answering fails calls
// instead of hanging them. A connection lost before the commit resets the
// pool and the function runs once more on a fresh connection, so the
// store works again as soon as the database is back. A connection lost
// during the commit is never retried: the commit may have happened.
//
// The store is not a store.Snapshotter: store/bolt's snapshot is a bbolt
// file, which this backend cannot write. Copy data between backends
// through the store.Store interface instead.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authsrv/authsrv/store"
)

// Defaults for the zero Options.
const (
	// DefaultSchema is the PostgreSQL schema that holds the tables.
	DefaultSchema = "public"
	// DefaultMaxConns is the most connections the pool opens.
	DefaultMaxConns = 16
	// DefaultConnectTimeout bounds one connection attempt (TCP, TLS and
	// authentication).
	DefaultConnectTimeout = 5 * time.Second
	// DefaultQueryTimeout bounds each statement, the wait for a pooled
	// connection, and the commit.
	DefaultQueryTimeout = 10 * time.Second
	// DefaultIdleInTxTimeout is how long the server keeps a transaction
	// whose client went silent (a node that froze in an Update function)
	// before it ends the session and frees its locks.
	DefaultIdleInTxTimeout = time.Minute
	// DefaultMaxAttempts is how many times Update runs its function
	// before it gives up on serialization failures.
	DefaultMaxAttempts = 32
	// DefaultProbeInterval is how often a store whose writes the database
	// refuses (disk full, a read-only server) tries a probe write.
	DefaultProbeInterval = 2 * time.Second
	// DefaultMaxBatch is the most Update calls committed together. It
	// keeps a batch's savepoints within the 64 subtransactions PostgreSQL
	// tracks per session without overflowing to disk.
	DefaultMaxBatch = 64
	// DefaultMaxBatchTime is how long a batch starts new functions; the
	// calls it did not reach go to the next batch.
	DefaultMaxBatchTime = 50 * time.Millisecond
)

// Backoff between the attempts of a batch that lost a serialization
// conflict: a random wait up to a bound that doubles from retryBase with
// every attempt, capped at retryCap.
const (
	retryBase = 1 * time.Millisecond
	retryCap  = 50 * time.Millisecond
)

// Options tunes Open. The zero value is ready to use.
type Options struct {
	// Schema is the PostgreSQL schema of the store's tables. Open creates
	// it when it is missing. Empty means DefaultSchema. Several stores
	// (tests, or separate sites) can share one database in separate
	// schemas.
	Schema string
	// MaxConns is the most connections the pool opens. 0 means
	// DefaultMaxConns; it overrides a pool_max_conns in the DSN.
	MaxConns int32
	// ConnectTimeout bounds one connection attempt. 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// QueryTimeout bounds each statement (it is also the session's
	// statement_timeout), the wait for a pooled connection and the
	// commit. 0 means DefaultQueryTimeout.
	QueryTimeout time.Duration
	// IdleInTxTimeout is the session's
	// idle_in_transaction_session_timeout. 0 means
	// DefaultIdleInTxTimeout.
	IdleInTxTimeout time.Duration
	// MaxAttempts is how many times Update runs its function when
	// PostgreSQL reports serialization failures or deadlocks. 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// ProbeInterval is how often, while the database refuses writes, a
	// probe write checks whether writes work again. 0 means
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// MaxBatch is the most Update calls committed in one transaction.
	// 0 means DefaultMaxBatch; 1 turns group commit off (Update calls of
	// one Store then commit one at a time).
	MaxBatch int
	// MaxBatchTime bounds how long a batch starts new functions: the
	// calls it has not reached by then go to the next batch. 0 means
	// DefaultMaxBatchTime.
	MaxBatchTime time.Duration
}

// withDefaults checks o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	for name, d := range map[string]time.Duration{
		"ConnectTimeout": o.ConnectTimeout, "QueryTimeout": o.QueryTimeout,
		"IdleInTxTimeout": o.IdleInTxTimeout, "ProbeInterval": o.ProbeInterval,
		"MaxBatchTime": o.MaxBatchTime,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("negative %s %v", name, d))
		}
	}
	if o.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("negative MaxConns %d", o.MaxConns))
	}
	if o.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("negative MaxAttempts %d", o.MaxAttempts))
	}
	if o.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("negative MaxBatch %d", o.MaxBatch))
	}
	if o.Schema != "" && !validName(o.Schema) {
		errs = append(errs, fmt.Errorf("schema name %q is not valid UTF-8 without NUL", o.Schema))
	}
	if len(errs) > 0 {
		return o, errors.Join(errs...)
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.QueryTimeout == 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	if o.IdleInTxTimeout == 0 {
		o.IdleInTxTimeout = DefaultIdleInTxTimeout
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatchTime == 0 {
		o.MaxBatchTime = DefaultMaxBatchTime
	}
	return o, nil
}

// Store is a store.Store on a PostgreSQL database. It is safe for
// concurrent use; several Store values, in one process or in many, may
// share a database.
type Store struct {
	pool  *pgxpool.Pool
	q     queries
	opts  Options
	where string // "user@host:port/database schema s", for errors

	// The Update queue (batch.go): the calls waiting, oldest first, and
	// whether a call leads a batch.
	qmu     sync.Mutex
	pending []*call
	leading bool
	// beforeBatch, when set (tests only), runs in the leader before it
	// takes its batch from the queue; onCommit, when set (tests only),
	// is told how many functions each commit held.
	beforeBatch func()
	onCommit    func(calls int)

	health store.WriteHealth
	// life holds the calls (View, Update, Ping) and the probe goroutine
	// that Close waits for.
	life store.Lifecycle
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.HealthReporter = (*Store)(nil)
)

// Open connects to the database that dsn names (a libpq URL or key=value
// string, as pgx accepts it), creates or migrates the store's tables, and
// returns the store. It fails with a clear error when the database is
// unreachable, refuses the credentials, or was migrated by a newer release
// (ErrSchemaTooNew). Errors never contain the DSN's password.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	password := dsnPassword(dsn)
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("store/postgres: open: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, redact(fmt.Errorf("store/postgres: open: %w", err), password)
	}
	if cfg.ConnConfig.Password != "" {
		password = cfg.ConnConfig.Password
	}
	cfg.MaxConns = opts.MaxConns
	cfg.MinConns = 0
	cfg.PingTimeout = opts.QueryTimeout
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	rp := cfg.ConnConfig.RuntimeParams
	rp["statement_timeout"] = strconv.FormatInt(opts.QueryTimeout.Milliseconds(), 10)
	rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(opts.IdleInTxTimeout.Milliseconds(), 10)
	if rp["application_name"] == "" {
		rp["application_name"] = "authsrv"
	}
	where := fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if opts.Schema != DefaultSchema {
		where += " schema " + opts.Schema
	}
	q := newQueries(opts.Schema)
	cfg.AfterConnect = q.prepare
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, redact(fmt.Errorf("store/postgres: open %s: %w", where, err), password)
	}
	s := &Store{pool: pool, q: q, opts: opts, where: where}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, redact(openError(ctx, where, err), password)
	}
	// The connections made before the migration could not prepare
	// statements on tables that did not exist yet.
	pool.Reset()
	return s, nil
}

// openError explains why Open failed: the database unreachable, the
// credentials refused, or the error as it is.
func openError(ctx context.Context, where string, err error) error {
	var why string
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, ErrSchemaTooNew):
	case errors.As(err, &pe) && (pe.Code == "28P01" || pe.Code == "28000"):
		why = "authentication failed (wrong user or password, or pg_hba.conf refuses this client)"
	case errors.As(err, &pe) && pe.Code == "3D000":
		why = "the database does not exist"
	case errors.As(err, &pe) && pe.Code == "42501":
		why = "permission denied (the role cannot create the store's schema or tables)"
	case ctx.Err() != nil:
		why = "gave up waiting for the database"
	case errors.As(err, &pe):
	default:
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) || pgconn.Timeout(err) {
			why = "database unreachable"
		}
	}
	if why != "" {
		return fmt.Errorf("store/postgres: open %s: %s: %w", where, why, err)
	}
	return fmt.Errorf("store/postgres: open %s: %w", where, err)
}

// dsnPassword finds the password in a URL-shaped DSN or a key=value one;
// "" when there is none or the DSN cannot be read.
func dsnPassword(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			return p
		}
	}
	for f := range strings.FieldsSeq(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			return strings.Trim(v, "'")
		}
	}
	return ""
}

// redactedError is an error whose text had the password taken out. It
// unwraps to the original, for errors.Is and errors.As.
type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// redact makes sure err's text does not show password.
func redact(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &redactedError{text: strings.ReplaceAll(err.Error(), password, "xxxxx"), err: err}
}

// Close waits for running calls to finish and closes the pool. Later calls
// return store.ErrClosed. It is safe to call more than once and always
// returns nil. It must not be called from inside a View or Update function.
func (s *Store) Close() error {
	_ = s.life.Close(func() error {
		s.pool.Close()
		return nil
	})
	return nil
}

// Ping checks that the database answers, within QueryTimeout. Health
// probes call it.
func (s *Store) Ping(ctx context.Context) error {
	if !s.life.Enter() {
		return store.ErrClosed
	}
	defer s.life.Done()
	ctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("store/postgres: ping %s: %w", s.where, err)
	}
	return nil
}

// View runs fn in a REPEATABLE READ, READ ONLY transaction: it sees one
// consistent snapshot. The transaction begins with fn's first statement,
// in the same round trip, and a function that sends none costs no round
// trip at all. Writes in it return store.ErrReadOnly. fn's error is
// returned as is, unless a statement failed (the database went away),
// whose error is returned instead; a panic in fn is returned as a
// *PanicError. When ctx is already done, View returns its error without
// running fn.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.life.Begin(ctx); err != nil {
		return err
	}
	defer s.life.Done()
	vc := &viewConn{s: s}
	defer vc.end(ctx)
	t := &tx{s: s, ctx: ctx, ptx: vc}
	ferr := safeCall(fn, t)
	if t.err != nil {
		return s.fail(ctx, "view", t.err)
	}
	return ferr
}

// beginView begins a View's transaction.
const beginView = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`

// viewConn is a View's transaction: it takes a pooled connection and
// begins with the first statement, in one round trip.
type viewConn struct {
	s     *Store
	c     *pgxpool.Conn // nil before the first statement
	begun bool
}

// start takes a connection and sends beginView and sql. When the
// connection turns out to be lost (the database restarted), before fn saw
// anything, it resets the pool and tries once more on a new connection.
func (v *viewConn) start(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	for retried := false; ; retried = true {
		var err error
		if v.c == nil {
			actx, cancel := context.WithTimeout(ctx, v.s.opts.QueryTimeout)
			v.c, err = v.s.pool.Acquire(actx)
			cancel()
		}
		if err == nil {
			var br pgx.BatchResults
			if br, err = sendPrefixed(ctx, v.c, []string{beginView}, sql, args); err == nil {
				v.begun = true
				return br, nil
			}
		}
		if v.c != nil {
			v.c.Release()
			v.c = nil
		}
		if retried || classify(err, false) != retryConn {
			return nil, err
		}
		v.s.pool.Reset()
	}
}

// end rolls the transaction back and returns the connection. pgxpool
// closes a connection that is still in a transaction (a failed rollback).
func (v *viewConn) end(ctx context.Context) {
	if v.c == nil {
		return
	}
	if v.begun {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.s.opts.QueryTimeout)
		_, _ = v.c.Exec(rctx, `ROLLBACK`)
		cancel()
	}
	v.c.Release()
	v.c = nil
}

func (v *viewConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if v.begun {
		return v.c.Exec(ctx, sql, args...)
	}
	br, err := v.start(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return execLast(br)
}

func (v *viewConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if v.begun {
		return v.c.Query(ctx, sql, args...)
	}
	br, err := v.start(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	return queryLast(br)
}

func (v *viewConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if v.begun {
		return v.c.QueryRow(ctx, sql, args...)
	}
	br, err := v.start(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

// Update runs fn in a SERIALIZABLE transaction and commits it, together
// with the functions of other Update calls of this Store that are waiting
// meanwhile (at most MaxBatch), each in a savepoint of its own (see
// batch.go). When PostgreSQL reports a serialization failure or a
// deadlock, the transaction is rolled back and the batch runs again (up
// to MaxAttempts times, after a short random wait); when the connection
// was lost before the commit, the pool is reset and the batch runs once
// more. Only the last run's writes are committed. fn's error is returned
// as is, and nothing fn wrote is kept; a panic in fn is returned as a
// *PanicError, with the same effect; neither affects the other functions
// of the batch. When ctx is done before fn's turn, Update returns its
// error without running fn; once fn has run, Update waits for the commit
// and returns its result.
//
// A write the database refuses (disk full, a read-only server) returns a
// *store.WriteError, and WriteHealth tracks it.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.life.Begin(ctx); err != nil {
		return err
	}
	defer s.life.Done()
	return s.update(ctx, fn)
}

// begin starts a transaction, waiting at most QueryTimeout for a
// connection and the server's answer.
func (s *Store) begin(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	bctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	return s.pool.BeginTx(bctx, o)
}

// rollback ends ptx, also when ctx is done (the rollback then still gets
// QueryTimeout; pgx closes a connection whose rollback fails).
func (s *Store) rollback(ctx context.Context, ptx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.QueryTimeout)
	defer cancel()
	_ = ptx.Rollback(rctx)
}

// fail builds the error of a failed step: ctx's own error when ctx is
// done (so that errors.Is finds context.Canceled), a *store.WriteError
// when the database refused a write, and otherwise the error with the
// step and the database named.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	err = fmt.Errorf("store/postgres: %s %s: %w", op, s.where, err)
	if writeRefused(err) {
		we, first := s.health.Failed(err, time.Now())
		if first {
			s.startProbe()
		}
		return we
	}
	return err
}

// retryKind says whether a failed attempt runs again.
type retryKind int

const (
	retryNo       retryKind = iota
	retryConflict           // serialization failure or deadlock: nothing was kept
	retryConn               // the connection was lost before the commit
)

// classify decides whether a failed attempt runs again. committing is set
// for an error of the commit itself: a lost connection then may have
// committed, and is never retried.
func classify(err error, committing bool) retryKind {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01":
			// serialization_failure, deadlock_detected: rolled back.
			return retryConflict
		case committing:
			return retryNo
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			// connection_exception, admin_shutdown, crash_shutdown,
			// cannot_connect_now.
			return retryConn
		}
		return retryNo
	}
	if committing || pgconn.Timeout(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return retryNo
	}
	// pgx's errors that are not the server's are those of the connection:
	// a refused or broken socket, or a connection closed by the pool.
	return retryConn
}

// writeRefused reports whether the database refused a write for a reason
// of its own: a full disk, a failing device, or a server that only reads
// (a standby after a failover).
func writeRefused(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return false
	}
	switch pe.Code {
	case "53100", "58030", "25006": // disk_full, io_error, read_only_sql_transaction
		return true
	}
	return false
}

// PanicError is the error of a View or Update whose function panicked.
type PanicError struct {
	// Value is what the function panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("store/postgres: panic in transaction function: %v", e.Value)
}

// safeCall runs fn, turning a panic into a *PanicError.
func safeCall(fn func(store.Tx) error, t store.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(t)
}
