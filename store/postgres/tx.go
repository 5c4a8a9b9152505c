package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/authsrv/authsrv/store"
)

// pageSize is how many rows ForEach reads per query: a huge bucket is
// walked without loading it into memory.
const pageSize = 256

var (
	// errEmptyKey is returned by Put for an empty key.
	errEmptyKey = errors.New("empty key")
	// errBucketName is returned by writes to a bucket whose name
	// PostgreSQL's text cannot hold.
	errBucketName = errors.New("bucket name is not valid UTF-8 without NUL")
)

// validName reports whether name fits a PostgreSQL text value.
func validName(name string) bool {
	return utf8.ValidString(name) && !strings.ContainsRune(name, 0)
}

// tx is a store.Tx over one PostgreSQL transaction. Every read goes to the
// database, so the transaction sees its own writes. Like bbolt's, it is not
// safe for use by several goroutines at once, nor after its function
// returns.
type tx struct {
	s        *Store
	ctx      context.Context
	ptx      stmts
	writable bool
	// err is the first failed statement's error. PostgreSQL refuses every
	// statement after it, so later calls return it without a round trip,
	// and View and Update return it whatever the function returned.
	err error
	// mods counts writes: open iterations must look again.
	mods int
	// run is the PreCommit state of this run of a batch of Update
	// functions (see batch.go), each owning the hooks it registers by its
	// call; a run that is rolled back (and retried) drops it. nil for
	// read transactions.
	run *store.PreCommits[*call]
	// shared is set once the function used PreCommit: it changed state
	// that the other functions of its batch share, which rolling back
	// to its savepoint would not undo.
	shared bool
}

// stmts runs statements: a pgx.Tx, or an Update function's view of its
// batch's transaction (fnConn).
type stmts interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var _ store.PreCommitter = (*tx)(nil)

// PreCommit keeps key's value for this run of the transaction and
// registers its hook, which runs once after the last function of the
// batch, in the same transaction, before the commit (see
// store.PreCommitter). In a read transaction, or from a hook, it returns
// start's value and keeps nothing.
func (t *tx) PreCommit(key any, start func() (any, func(store.Tx) error)) any {
	if t.run != nil && !t.run.Hooking {
		t.shared = true
	}
	return t.run.PreCommit(key, start)
}

func (t *tx) Writable() bool { return t.writable }

// Bucket returns the named bucket. Buckets need no creation: a bucket is
// its rows.
func (t *tx) Bucket(name string) store.Bucket { return &bucket{t: t, name: name} }

func (t *tx) DeleteBucket(name string) error {
	if !t.writable {
		return fmt.Errorf("delete bucket %q: %w", name, store.ErrReadOnly)
	}
	if !validName(name) {
		return nil // no such bucket can exist
	}
	if t.err != nil {
		return t.err
	}
	ctx, cancel := t.stmtCtx()
	defer cancel()
	if _, err := t.ptx.Exec(ctx, t.s.q.delBucket, name); err != nil {
		return t.failed(fmt.Sprintf("delete bucket %q", name), err)
	}
	t.mods++
	return nil
}

// stmtCtx bounds one statement: the server cancels it after QueryTimeout
// (statement_timeout), which keeps the connection; the client gives up a
// little later, for a server that does not answer at all, and pgx then
// closes the connection.
func (t *tx) stmtCtx() (context.Context, context.CancelFunc) {
	d := t.s.opts.QueryTimeout
	return context.WithTimeout(t.ctx, d+min(d/4, time.Second))
}

// failed records a failed statement (the first one is the transaction's
// error) and returns its error.
func (t *tx) failed(op string, err error) error {
	err = fmt.Errorf("%s: %w", op, err)
	if t.err == nil {
		t.err = err
	}
	return err
}

type bucket struct {
	t    *tx
	name string
}

// readable reports whether a read may query the database.
func (b *bucket) readable() bool { return b.t.err == nil && validName(b.name) }

// writeCheck returns the error of a write that cannot be sent.
func (b *bucket) writeCheck(op string) error {
	switch {
	case !b.t.writable:
		return fmt.Errorf("bucket %q: %s: %w", b.name, op, store.ErrReadOnly)
	case !validName(b.name):
		return fmt.Errorf("bucket %q: %s: %w", b.name, op, errBucketName)
	case b.t.err != nil:
		return b.t.err
	}
	return nil
}

func (b *bucket) Get(key []byte) []byte {
	if len(key) == 0 || !b.readable() {
		return nil
	}
	ctx, cancel := b.t.stmtCtx()
	defer cancel()
	var v []byte
	err := b.t.ptx.QueryRow(ctx, b.t.s.q.get, b.name, key).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		_ = b.t.failed(fmt.Sprintf("bucket %q: get", b.name), err)
		return nil
	case v == nil:
		return []byte{} // present and empty
	}
	return v
}

// Put stores key and value; pgx sends them before Put returns, so the
// caller may reuse its buffers. A nil value is stored as an empty one.
func (b *bucket) Put(key, value []byte) error {
	if err := b.writeCheck("put"); err != nil {
		return err
	}
	if len(key) == 0 {
		return fmt.Errorf("bucket %q: put: %w", b.name, errEmptyKey)
	}
	if value == nil {
		value = []byte{} // nil would be sent as NULL
	}
	ctx, cancel := b.t.stmtCtx()
	defer cancel()
	if _, err := b.t.ptx.Exec(ctx, b.t.s.q.put, b.name, key, value); err != nil {
		return b.t.failed(fmt.Sprintf("bucket %q: put %d-byte key, %d-byte value", b.name, len(key), len(value)), err)
	}
	b.t.mods++
	return nil
}

func (b *bucket) Delete(key []byte) error {
	if err := b.writeCheck("delete"); err != nil {
		if errors.Is(err, errBucketName) {
			return nil // no such bucket can exist
		}
		return err
	}
	if len(key) == 0 {
		return nil
	}
	ctx, cancel := b.t.stmtCtx()
	defer cancel()
	if _, err := b.t.ptx.Exec(ctx, b.t.s.q.del, b.name, key); err != nil {
		return b.t.failed(fmt.Sprintf("bucket %q: delete", b.name), err)
	}
	b.t.mods++
	return nil
}

// kv is one row.
type kv struct{ k, v []byte }

// scan reads up to limit rows in key order: from the key after from (or
// from from itself, with inclusive), below upper unless it is nil.
func (b *bucket) scan(from []byte, inclusive bool, upper []byte, limit int) ([]kv, error) {
	if b.t.err != nil {
		return nil, b.t.err
	}
	if from == nil {
		from = []byte{}
	}
	q := &b.t.s.q
	var sql string
	args := []any{b.name, from}
	switch {
	case inclusive && upper == nil:
		sql = q.scanGE
	case inclusive:
		sql, args = q.scanGEUpp, append(args, upper)
	case upper == nil:
		sql = q.scanGT
	default:
		sql, args = q.scanGTUpp, append(args, upper)
	}
	args = append(args, limit)
	return b.rows(sql, args...)
}

// rows runs a query of (key, value) rows and reads them all.
func (b *bucket) rows(sql string, args ...any) ([]kv, error) {
	ctx, cancel := b.t.stmtCtx()
	defer cancel()
	rows, err := b.t.ptx.Query(ctx, sql, args...)
	if err != nil {
		return nil, b.t.failed(fmt.Sprintf("bucket %q: read", b.name), err)
	}
	defer rows.Close()
	var out []kv
	for rows.Next() {
		var r kv
		if err := rows.Scan(&r.k, &r.v); err != nil {
			return nil, b.t.failed(fmt.Sprintf("bucket %q: read", b.name), err)
		}
		if r.v == nil {
			r.v = []byte{}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, b.t.failed(fmt.Sprintf("bucket %q: read", b.name), err)
	}
	return out, nil
}

// successor returns the smallest key above every key that starts with
// prefix, or nil when there is none (the prefix is empty or all 0xff).
func successor(prefix []byte) []byte {
	p := bytes.Clone(prefix)
	for len(p) > 0 && p[len(p)-1] == 0xff {
		p = p[:len(p)-1]
	}
	if len(p) == 0 {
		return nil
	}
	p[len(p)-1]++
	return p
}

// ForEach walks the keys that start with prefix, pageSize rows per query.
// In a write transaction fn may write, also to this bucket (deleting the
// key it was given is fine): the walk then reads again after the last key
// it visited, and sees later keys as they are at that moment, as
// store/bolt does.
func (b *bucket) ForEach(prefix []byte, fn func(k, v []byte) error) error {
	if !validName(b.name) {
		return nil
	}
	upper := successor(prefix)
	from, inclusive := prefix, true
	for {
		page, err := b.scan(from, inclusive, upper, pageSize)
		if err != nil {
			return err
		}
		reread := false
		for _, r := range page {
			mods := b.t.mods
			if err := fn(r.k, r.v); err != nil {
				if errors.Is(err, store.ErrStop) {
					return nil
				}
				return err
			}
			from, inclusive = r.k, false
			if b.t.mods != mods {
				reread = true // the rest of the page may be stale
				break
			}
		}
		if !reread && len(page) < pageSize {
			return nil
		}
	}
}

// Cursor returns a cursor that reads one row per move, with keyset
// queries: it needs no open result set, so fn may write while it walks.
func (b *bucket) Cursor() store.Cursor { return &cursor{b: b} }

func (b *bucket) NextSequence() (uint64, error) {
	if err := b.writeCheck("next sequence"); err != nil {
		return 0, err
	}
	ctx, cancel := b.t.stmtCtx()
	defer cancel()
	var n int64
	if err := b.t.ptx.QueryRow(ctx, b.t.s.q.nextSeq, b.name).Scan(&n); err != nil {
		return 0, b.t.failed(fmt.Sprintf("bucket %q: next sequence", b.name), err)
	}
	b.t.mods++
	return uint64(n), nil
}

func (b *bucket) Sequence() uint64 {
	if !b.readable() {
		return 0
	}
	ctx, cancel := b.t.stmtCtx()
	defer cancel()
	var n int64
	err := b.t.ptx.QueryRow(ctx, b.t.s.q.seq1, b.name).Scan(&n)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			_ = b.t.failed(fmt.Sprintf("bucket %q: sequence", b.name), err)
		}
		return 0
	}
	return uint64(n)
}

// cursor positions: on a key, before the first, past the last, or
// nowhere (new, or its bucket was empty).
const (
	posNone = iota
	posKey
	posBefore
	posAfter
)

// cursor is a store.Cursor of keyset queries.
type cursor struct {
	b   *bucket
	pos int
	key []byte // the key it is on, when pos is posKey
}

// land moves the cursor to the first row of rows, or to miss when there
// is none.
func (c *cursor) land(rows []kv, err error, miss int) ([]byte, []byte) {
	if err != nil || len(rows) == 0 {
		c.pos, c.key = miss, nil
		return nil, nil
	}
	c.pos, c.key = posKey, rows[0].k
	return rows[0].k, rows[0].v
}

func (c *cursor) First() (k, v []byte) {
	if !c.b.readable() {
		return c.land(nil, nil, posNone)
	}
	rows, err := c.b.scan(nil, true, nil, 1)
	return c.land(rows, err, posNone)
}

func (c *cursor) Last() (k, v []byte) {
	if !c.b.readable() {
		return c.land(nil, nil, posNone)
	}
	rows, err := c.b.rows(c.b.t.s.q.last, c.b.name)
	return c.land(rows, err, posNone)
}

func (c *cursor) Seek(key []byte) (k, v []byte) {
	if !c.b.readable() {
		return c.land(nil, nil, posNone)
	}
	rows, err := c.b.scan(key, true, nil, 1)
	return c.land(rows, err, posAfter)
}

func (c *cursor) Next() (k, v []byte) {
	if !c.b.readable() {
		return c.land(nil, nil, posNone)
	}
	switch c.pos {
	case posKey:
		rows, err := c.b.scan(c.key, false, nil, 1)
		return c.land(rows, err, posAfter)
	case posBefore:
		return c.First()
	}
	return nil, nil
}

func (c *cursor) Prev() (k, v []byte) {
	if !c.b.readable() {
		return c.land(nil, nil, posNone)
	}
	switch c.pos {
	case posKey:
		rows, err := c.b.rows(c.b.t.s.q.prev, c.b.name, c.key)
		return c.land(rows, err, posBefore)
	case posAfter:
		return c.Last()
	}
	return nil, nil
}
