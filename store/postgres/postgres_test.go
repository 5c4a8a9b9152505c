package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/postgres"
	"github.com/authsrv/authsrv/store/storetest"
)

// cluster is one PostgreSQL server for a test and an administrative pool
// on its database. Each store gets a schema of its own, so that every
// subtest starts empty.
type cluster struct {
	pg    *testsvc.PostgresServer
	admin *pgxpool.Pool
	n     atomic.Int64
}

func newCluster(tb testing.TB) *cluster {
	tb.Helper()
	pg := testsvc.Postgres(tb)
	admin, err := pgxpool.New(context.Background(), pg.DSN())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(admin.Close)
	return &cluster{pg: pg, admin: admin}
}

// schema returns a new schema name, dropped when tb ends.
func (c *cluster) schema(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%03d", c.n.Add(1))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`)
	})
	return name
}

// open opens a store on schema, closed when tb ends.
func (c *cluster) open(tb testing.TB, schema string, opts postgres.Options) *postgres.Store {
	tb.Helper()
	opts.Schema = schema
	s, err := postgres.Open(tb.Context(), c.pg.DSN(), opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// TestStore runs the conformance suite and this backend's own tests
// against one PostgreSQL server.
func TestStore(t *testing.T) {
	c := newCluster(t)
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			return c.open(t, c.schema(t), postgres.Options{})
		})
	})
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *cluster)
	}{
		{"TwoNodesCounter", testTwoNodesCounter},
		{"TwoNodesSequence", testTwoNodesSequence},
		{"TwoNodesConfigRevision", testTwoNodesConfigRevision},
		{"ConcurrentOpen", testConcurrentOpen},
		{"SchemaTooNew", testSchemaTooNew},
		{"MigrateFromVersion1", testMigrateFromVersion1},
		{"WrongPassword", testWrongPassword},
		{"ForEachPages", testForEachPages},
		{"CursorReadsOwnWrites", testCursorOwnWrites},
		{"PreCommit", testPreCommit},
		{"PreCommitHookError", testPreCommitHookError},
		{"BucketNames", testBucketNames},
		{"BadOptions", testBadOptions},
		{"Ping", testPing},
		{"StatementTimeout", testStatementTimeout},
		{"WriteHealth", testWriteHealth},
		{"BatchCommits", testBatchCommits},
		{"BatchFailures", testBatchFailures},
		{"BatchCancelled", testBatchCancelled},
		{"BatchGoexit", testBatchGoexit},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, c) })
	}
}

func increment(tx store.Tx) error {
	b := tx.Bucket("c")
	return b.Put([]byte("n"), store.Uint64Key(store.KeyUint64(b.Get([]byte("n")))+1))
}

func counter(t *testing.T, s store.Store) uint64 {
	t.Helper()
	var n uint64
	if err := s.View(t.Context(), func(tx store.Tx) error {
		n = store.KeyUint64(tx.Bucket("c").Get([]byte("n")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// testTwoNodesCounter: 64 goroutines raise one counter through two stores
// on the same tables (two nodes): no increment is lost or applied twice,
// and, because the nodes' writers take turns under the writer lock, no
// function runs twice. (testPreCommit shows the retry of a conflict with
// a writer that does not lock.)
func testTwoNodesCounter(t *testing.T, c *cluster) {
	schema := c.schema(t)
	nodes := []*postgres.Store{c.open(t, schema, postgres.Options{}), c.open(t, schema, postgres.Options{})}
	const goroutines, each = 64, 6
	var runs atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := nodes[(g+i)%2].Update(t.Context(), func(tx store.Tx) error {
					runs.Add(1)
					return increment(tx)
				}); err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, s := range nodes {
		if n := counter(t, s); n != goroutines*each {
			t.Errorf("node %d: counter = %d, want %d", i, n, goroutines*each)
		}
	}
	if runs.Load() != goroutines*each {
		t.Errorf("the functions ran %d times for %d updates; want once each: the nodes' writers failed each other instead of taking turns", runs.Load(), goroutines*each)
	}
}

// testTwoNodesSequence: NextSequence through two nodes at once hands out
// every number once.
func testTwoNodesSequence(t *testing.T, c *cluster) {
	schema := c.schema(t)
	nodes := []*postgres.Store{c.open(t, schema, postgres.Options{}), c.open(t, schema, postgres.Options{})}
	const goroutines, each = 16, 5
	var mu sync.Mutex
	got := map[uint64]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				var n uint64
				if err := nodes[(g+i)%2].Update(t.Context(), func(tx store.Tx) error {
					var err error
					n, err = tx.Bucket("seq").NextSequence()
					if err != nil {
						return err
					}
					return tx.Bucket("seq").Put(store.Uint64Key(n), nil)
				}); err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				mu.Lock()
				got[n]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := uint64(1); i <= goroutines*each; i++ {
		if got[i] != 1 {
			t.Errorf("sequence value %d handed out %d times", i, got[i])
		}
	}
	if err := nodes[1].View(t.Context(), func(tx store.Tx) error {
		if n := tx.Bucket("seq").Sequence(); n != goroutines*each {
			t.Errorf("Sequence = %d, want %d", n, goroutines*each)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// testTwoNodesConfigRevision: a configuration revision raised through one
// node is what the other reads next.
func testTwoNodesConfigRevision(t *testing.T, c *cluster) {
	schema := c.schema(t)
	a, b := c.open(t, schema, postgres.Options{}), c.open(t, schema, postgres.Options{})
	rev := func(s store.Store) uint64 {
		var n uint64
		if err := s.View(t.Context(), func(tx store.Tx) error { n = store.ConfigRevision(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	bump := func(s store.Store) {
		if err := s.Update(t.Context(), func(tx store.Tx) error { _, err := store.BumpConfigRevision(tx); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(rev(a), rev(b)); got != "0 0" {
		t.Fatalf("revisions of a new store = %s, want 0 0", got)
	}
	bump(a)
	if n := rev(b); n != 1 {
		t.Errorf("node b reads revision %d after node a raised it, want 1", n)
	}
	bump(b)
	bump(b)
	if n := rev(a); n != 3 {
		t.Errorf("node a reads revision %d after node b raised it twice, want 3", n)
	}
}

// testConcurrentOpen: nodes opening a new database at the same time all
// succeed, and the tables are created once.
func testConcurrentOpen(t *testing.T, c *cluster) {
	schema := c.schema(t)
	const nodes = 6
	var wg sync.WaitGroup
	for range nodes {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), c.pg.DSN(), postgres.Options{Schema: schema})
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			if err := s.Update(t.Context(), increment); err != nil {
				t.Errorf("Update: %v", err)
			}
			_ = s.Close()
		})
	}
	wg.Wait()
	var rows, version int
	if err := c.admin.QueryRow(t.Context(), `SELECT count(*), max(version) FROM `+schema+`.authsrv_schema`).Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || version != postgres.SchemaVersion {
		t.Errorf("schema version table holds %d rows, version %d; want 1 row, version %d", rows, version, postgres.SchemaVersion)
	}
	if n := counter(t, c.open(t, schema, postgres.Options{})); n != nodes {
		t.Errorf("counter = %d, want %d", n, nodes)
	}
}

// testMigrateFromVersion1: tables of schema version 1 (before the writer
// lock) keep their data and get the writer lock table.
func testMigrateFromVersion1(t *testing.T, c *cluster) {
	schema := c.schema(t)
	s := c.open(t, schema, postgres.Options{})
	if err := s.Update(t.Context(), increment); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := c.admin.Exec(t.Context(), `DROP TABLE `+schema+`.authsrv_writer; UPDATE `+schema+`.authsrv_schema SET version = 1`); err != nil {
		t.Fatal(err)
	}
	s = c.open(t, schema, postgres.Options{})
	if err := s.Update(t.Context(), increment); err != nil {
		t.Fatalf("Update after the migration: %v", err)
	}
	if n := counter(t, s); n != 2 {
		t.Errorf("counter = %d, want 2", n)
	}
	var version int
	if err := c.admin.QueryRow(t.Context(), `SELECT max(version) FROM `+schema+`.authsrv_schema`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != postgres.SchemaVersion {
		t.Errorf("version = %d, want %d", version, postgres.SchemaVersion)
	}
}

// testSchemaTooNew: a node refuses tables a newer release migrated.
func testSchemaTooNew(t *testing.T, c *cluster) {
	schema := c.schema(t)
	s := c.open(t, schema, postgres.Options{})
	_ = s.Close()
	if _, err := c.admin.Exec(t.Context(), `UPDATE `+schema+`.authsrv_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), c.pg.DSN(), postgres.Options{Schema: schema})
	if !errors.Is(err, postgres.ErrSchemaTooNew) || !strings.Contains(fmt.Sprint(err), "version 99") {
		t.Errorf("Open of a schema at version 99 = %v, want ErrSchemaTooNew naming the version", err)
	}
}

// testWrongPassword: wrong credentials fail Open with a message that says
// so and does not show the password.
func testWrongPassword(t *testing.T, c *cluster) {
	const secret = "Wr0ng-s3cret-do-not-print"
	u, _ := url.Parse(c.pg.DSN())
	u.User = url.UserPassword(c.pg.User, secret)
	for _, dsn := range []string{
		u.String(),
		fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=disable", c.pg.Host, c.pg.Port, c.pg.User, secret, c.pg.Database),
	} {
		s, err := postgres.Open(t.Context(), dsn, postgres.Options{Schema: c.schema(t)})
		if err == nil {
			_ = s.Close()
			t.Fatal("Open with a wrong password succeeded")
		}
		msg := err.Error()
		if strings.Contains(msg, secret) {
			t.Errorf("the error shows the password: %s", msg)
		}
		t.Logf("wrong password: %s", msg)
		if !strings.Contains(msg, "authentication failed") {
			t.Errorf("error = %s, want it to say authentication failed", msg)
		}
	}
}

// testForEachPages walks a bucket larger than a page while writing to it:
// a key put after the one visited is visited, a later key deleted is not,
// and keys outside the prefix are left alone.
func testForEachPages(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{})
	const n = 1000
	if err := s.Update(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket("kv")
		for _, k := range []string{"j", "l", "k"} { // around and at the prefix
			if err := b.Put([]byte(k), []byte("other")); err != nil {
				return err
			}
		}
		for i := range n {
			if err := b.Put(fmt.Appendf(nil, "k%04d", i), []byte("old")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range n {
		switch {
		case i%10 == 1:
			// deleted while visiting i-1
		case i%10 == 0:
			want = append(want, fmt.Sprintf("k%04d", i), fmt.Sprintf("k%04dx", i))
		default:
			want = append(want, fmt.Sprintf("k%04d", i))
		}
	}
	for _, kind := range []string{"Update", "View"} {
		var got []string
		run := s.View
		if kind == "Update" {
			run = s.Update
		}
		if err := run(t.Context(), func(tx store.Tx) error {
			got = got[:0]
			b := tx.Bucket("kv")
			return b.ForEach([]byte("k0"), func(k, v []byte) error {
				got = append(got, string(k))
				if kind == "View" {
					return nil
				}
				if string(v) != "old" {
					return fmt.Errorf("%s = %q while walking, want old", k, v)
				}
				var i int
				if _, err := fmt.Sscanf(string(k), "k%04d", &i); err != nil || len(k) != 5 || i%10 != 0 {
					return nil
				}
				if err := b.Put(append(bytes.Clone(k), 'x'), []byte("old")); err != nil {
					return err
				}
				return b.Delete(fmt.Appendf(nil, "k%04d", i+1))
			})
		}); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: ForEach visited %d keys, want %d (first difference near %s)", kind, len(got), len(want), firstDiff(got, want))
		}
	}
	var outside []string
	if err := s.View(t.Context(), func(tx store.Tx) error {
		for _, k := range []string{"j", "k", "l"} {
			outside = append(outside, string(tx.Bucket("kv").Get([]byte(k))))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(outside, ","); got != "other,other,other" {
		t.Errorf("keys outside the prefix = %s, want them unchanged", got)
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("index %d: %s vs %s", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("length %d vs %d", len(a), len(b))
}

// testCursorOwnWrites: a cursor in an Update sees the transaction's own
// writes, and a cursor may be moved while the bucket changes.
func testCursorOwnWrites(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{})
	if err := s.Update(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket("c")
		for _, k := range []string{"b", "d"} {
			if err := b.Put([]byte(k), []byte(k)); err != nil {
				return err
			}
		}
		cur := b.Cursor()
		var got []string
		for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
			got = append(got, string(k))
			if string(k) == "b" {
				if err := b.Put([]byte("c"), []byte("c")); err != nil {
					return err
				}
				if err := b.Delete([]byte("d")); err != nil {
					return err
				}
			}
		}
		if k, _ := cur.Prev(); string(k) != "c" {
			t.Errorf("Prev after the end = %q, want c", k)
		}
		if strings.Join(got, ",") != "b,c" {
			t.Errorf("walk = %v, want [b c]", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

type pcKey struct{}

// rawIncrement raises the counter of increment in one statement of the
// administrative pool: a writer that does not take the writer lock (an
// administrator's UPDATE, say), which SERIALIZABLE still guards against.
func rawIncrement(t *testing.T, c *cluster, schema string) {
	t.Helper()
	tag, err := c.admin.Exec(context.Background(), `UPDATE `+schema+`.authsrv_kv
		SET value = decode(lpad(to_hex(('x' || encode(value, 'hex'))::bit(64)::bigint + 1), 16, '0'), 'hex')
		WHERE bucket = 'c' AND key = 'n'`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("raw increment: %v, %d rows", err, tag.RowsAffected())
	}
}

// testPreCommit: a hook runs once, after the function, in its
// transaction; values and hooks of a run that was rolled back for a
// serialization failure are dropped.
func testPreCommit(t *testing.T, c *cluster) {
	schema := c.schema(t)
	s := c.open(t, schema, postgres.Options{})
	if err := s.Update(t.Context(), increment); err != nil {
		t.Fatal(err)
	}
	var runs, starts, hooks int
	err := s.Update(t.Context(), func(tx store.Tx) error {
		runs++
		pc, ok := tx.(store.PreCommitter)
		if !ok {
			return errors.New("write tx is not a store.PreCommitter")
		}
		start := func() (any, func(store.Tx) error) {
			starts++
			v := new(int)
			return v, func(tx store.Tx) error {
				hooks++
				return tx.Bucket("h").Put([]byte("sum"), fmt.Appendf(nil, "%d", *v))
			}
		}
		for range 3 {
			*pc.PreCommit(pcKey{}, start).(*int)++
		}
		if runs == 1 {
			// This run takes its snapshot, then a writer outside the
			// lock changes the counter: this run cannot commit its
			// increment and must run again.
			_ = tx.Bucket("c").Get([]byte("n"))
			rawIncrement(t, c, schema)
		}
		return increment(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs < 2 || starts != runs || hooks != 1 {
		t.Errorf("runs, starts, hooks = %d, %d, %d; want at least 2 runs, one start per run, one hook", runs, starts, hooks)
	}
	if err := s.View(t.Context(), func(tx store.Tx) error {
		if got := string(tx.Bucket("h").Get([]byte("sum"))); got != "3" {
			t.Errorf("hook wrote %q, want 3 (the last run's value only)", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := counter(t, s); n != 3 {
		t.Errorf("counter = %d, want 3", n)
	}
	// In a View, PreCommit returns start's value and keeps nothing.
	if err := s.View(t.Context(), func(tx store.Tx) error {
		pc := tx.(store.PreCommitter)
		a := pc.PreCommit(pcKey{}, func() (any, func(store.Tx) error) { return 1, nil })
		b := pc.PreCommit(pcKey{}, func() (any, func(store.Tx) error) { return 2, nil })
		if a != 1 || b != 2 {
			t.Errorf("PreCommit in a View = %v, %v, want 1, 2", a, b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// testPreCommitHookError: a hook's error fails the Update as the
// function's would, and nothing is kept.
func testPreCommitHookError(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{})
	errHook := errors.New("hook failed")
	err := s.Update(t.Context(), func(tx store.Tx) error {
		tx.(store.PreCommitter).PreCommit(pcKey{}, func() (any, func(store.Tx) error) {
			return nil, func(tx store.Tx) error {
				if err := tx.Bucket("h").Put([]byte("k"), []byte("v")); err != nil {
					return err
				}
				return errHook
			}
		})
		return increment(tx)
	})
	if err != errHook {
		t.Fatalf("Update = %v, want the hook's error", err)
	}
	if n := counter(t, s); n != 0 {
		t.Errorf("counter = %d after a failed hook, want 0", n)
	}
}

// testBucketNames: a bucket name PostgreSQL's text cannot hold is refused
// for writes and reads as empty; any other name works.
func testBucketNames(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{})
	if err := s.Update(t.Context(), func(tx store.Tx) error {
		for _, name := range []string{"a\x00b", "\xff"} {
			b := tx.Bucket(name)
			if err := b.Put([]byte("k"), []byte("v")); err == nil {
				t.Errorf("Put into bucket %q = nil, want an error", name)
			}
			if _, err := b.NextSequence(); err == nil {
				t.Errorf("NextSequence in bucket %q = nil, want an error", name)
			}
			if v := b.Get([]byte("k")); v != nil {
				t.Errorf("Get in bucket %q = %q", name, v)
			}
			if err := tx.DeleteBucket(name); err != nil {
				t.Errorf("DeleteBucket(%q) = %v", name, err)
			}
		}
		return tx.Bucket("ünïcode 'quoted' \"name\"").Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.View(t.Context(), func(tx store.Tx) error {
		if v := tx.Bucket("ünïcode 'quoted' \"name\"").Get([]byte("k")); string(v) != "v" {
			t.Errorf("Get = %q, want v", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func testBadOptions(t *testing.T, c *cluster) {
	for _, o := range []postgres.Options{
		{QueryTimeout: -1}, {ConnectTimeout: -time.Second}, {MaxConns: -1}, {MaxAttempts: -2}, {Schema: "a\x00"},
	} {
		if s, err := postgres.Open(t.Context(), c.pg.DSN(), o); err == nil {
			_ = s.Close()
			t.Errorf("Open(%+v) = nil error", o)
		}
	}
	if _, err := postgres.Open(t.Context(), "postgres://u:pw-in-bad-dsn@host:notaport/db", postgres.Options{}); err == nil ||
		strings.Contains(err.Error(), "pw-in-bad-dsn") {
		t.Errorf("Open of a malformed DSN = %v, want an error without the password", err)
	}
}

func testPing(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{})
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping = %v", err)
	}
	_ = s.Close()
	if err := s.Ping(t.Context()); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ping after Close = %v, want ErrClosed", err)
	}
}

// testStatementTimeout: a database that does not answer a statement (here
// a lock another session holds) fails the call after QueryTimeout instead
// of hanging it, and nothing is retried past that bound.
func testStatementTimeout(t *testing.T, c *cluster) {
	schema := c.schema(t)
	const timeout = 500 * time.Millisecond
	s := c.open(t, schema, postgres.Options{QueryTimeout: timeout})
	if err := s.Update(t.Context(), increment); err != nil {
		t.Fatal(err)
	}
	locker, err := c.admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(t.Context(), `LOCK TABLE `+schema+`.authsrv_kv IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Update": func() error { return s.Update(t.Context(), increment) },
		"View": func() error {
			return s.View(t.Context(), func(tx store.Tx) error { tx.Bucket("c").Get([]byte("n")); return nil })
		},
	} {
		start := time.Now()
		err := call()
		took := time.Since(start)
		t.Logf("%s against a locked table: %s: %v", name, took.Round(time.Millisecond), err)
		if err == nil {
			t.Errorf("%s against a locked table succeeded", name)
		}
		if took > 4*timeout {
			t.Errorf("%s took %s, want about the query timeout %s", name, took, timeout)
		}
	}
	if err := locker.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), increment); err != nil {
		t.Fatalf("Update after the lock was released: %v", err)
	}
	if n := counter(t, s); n != 2 {
		t.Errorf("counter = %d, want 2", n)
	}
}

// testWriteHealth: a write the database refuses for a reason of its own
// (here disk_full, raised by a trigger) is a *store.WriteError that the
// write state reports once; reads go on; the probe finds that writes work
// again once the cause is gone, with no client write.
func testWriteHealth(t *testing.T, c *cluster) {
	schema := c.schema(t)
	s := c.open(t, schema, postgres.Options{ProbeInterval: 50 * time.Millisecond})
	if err := s.Update(t.Context(), increment); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var changes []bool
	if !store.WatchWrites(s, func(st store.WriteState) {
		mu.Lock()
		changes = append(changes, st.Failing)
		mu.Unlock()
	}) {
		t.Fatal("the store does not report its writes")
	}
	for _, stmt := range []string{
		`CREATE FUNCTION ` + schema + `.disk_full_trigger() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END$$`,
		`CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON ` + schema + `.authsrv_kv FOR EACH ROW EXECUTE FUNCTION ` + schema + `.disk_full_trigger()`,
	} {
		if _, err := c.admin.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		err := s.Update(t.Context(), increment)
		if we, ok := errors.AsType[*store.WriteError](err); !ok || !errors.Is(err, store.ErrWriteFailed) {
			t.Fatalf("Update on a full disk = %v (%T), want a *store.WriteError", err, err)
		} else if !strings.Contains(we.Reason(), "No space left") {
			t.Errorf("Reason = %q", we.Reason())
		}
	}
	if st := store.Writes(s); !st.Failing || st.Failed != 2 {
		t.Errorf("write state = %+v, want failing with 2 refused commits", st)
	}
	if n := counter(t, s); n != 1 {
		t.Errorf("read while writes fail: counter = %d, want 1", n)
	}
	if _, err := c.admin.Exec(t.Context(), `DROP TRIGGER disk_full ON `+schema+`.authsrv_kv`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for store.Writes(s).Failing {
		if time.Now().After(deadline) {
			t.Fatal("the probe did not find that writes work again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	got := fmt.Sprint(changes)
	mu.Unlock()
	if got != "[true false]" {
		t.Errorf("watcher saw %s, want [true false] (once each way)", got)
	}
	if err := s.Update(t.Context(), increment); err != nil {
		t.Errorf("Update after the disk has room again: %v", err)
	}
}

// TestOpenUnreachable: nothing listening, or a server that never answers,
// fails Open within the connect timeout with a clear message.
func TestOpenUnreachable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // hold it open, say nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	refused := testsvc.FreePort(t)
	const timeout = 500 * time.Millisecond
	for name, port := range map[string]int{"refused": refused, "silent": silent.Addr().(*net.TCPAddr).Port} {
		t.Run(name, func(t *testing.T) {
			dsn := fmt.Sprintf("postgres://authsrv:topsecret@127.0.0.1:%d/authsrv?sslmode=disable", port)
			start := time.Now()
			s, err := postgres.Open(t.Context(), dsn, postgres.Options{ConnectTimeout: timeout})
			took := time.Since(start)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			t.Logf("after %s: %s", took.Round(time.Millisecond), msg)
			if !strings.Contains(msg, "database unreachable") || !strings.Contains(msg, fmt.Sprint(port)) {
				t.Errorf("error = %s, want it to say the database at port %d is unreachable", msg, port)
			}
			if strings.Contains(msg, "topsecret") {
				t.Errorf("the error shows the password: %s", msg)
			}
			// pgx tries each address of the host once: allow a few
			// timeouts' worth, and never minutes.
			if took > 4*timeout+time.Second {
				t.Errorf("Open took %s, want about the connect timeout %s", took, timeout)
			}
		})
	}
}

// TestRestart stops PostgreSQL in the middle of an Update: the Update
// fails within the timeouts, nothing of it is kept, calls fail fast while
// the server is down, and the store works again once it is back, without
// being reopened.
func TestRestart(t *testing.T) {
	c := newCluster(t)
	opts := postgres.Options{ConnectTimeout: time.Second, QueryTimeout: 2 * time.Second}
	s := c.open(t, c.schema(t), opts)
	put := func(v string) error {
		return s.Update(t.Context(), func(tx store.Tx) error { return tx.Bucket("kv").Put([]byte("k"), []byte(v)) })
	}
	get := func() (string, error) {
		var v string
		err := s.View(t.Context(), func(tx store.Tx) error { v = string(tx.Bucket("kv").Get([]byte("k"))); return nil })
		return v, err
	}
	if err := put("1"); err != nil {
		t.Fatal(err)
	}

	inside, stopped := make(chan struct{}), make(chan struct{})
	var once sync.Once
	result := make(chan error, 1)
	go func() {
		result <- s.Update(t.Context(), func(tx store.Tx) error {
			b := tx.Bucket("kv")
			_ = b.Get([]byte("k"))
			once.Do(func() { close(inside) })
			<-stopped
			if err := b.Put([]byte("k"), []byte("half")); err != nil {
				return err
			}
			return b.Put([]byte("k2"), []byte("half"))
		})
	}()
	<-inside
	c.pg.Stop(t)
	start := time.Now()
	close(stopped)
	select {
	case err := <-result:
		if err == nil {
			t.Fatal("Update across the server's stop succeeded")
		}
		t.Logf("Update across the stop failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(opts.ConnectTimeout + 2*opts.QueryTimeout + time.Second):
		t.Fatal("Update across the server's stop hangs")
	}

	start = time.Now()
	if _, err := get(); err == nil {
		t.Error("View with the server down succeeded")
	}
	if err := put("down"); err == nil {
		t.Error("Update with the server down succeeded")
	}
	if took := time.Since(start); took > 2*(opts.ConnectTimeout+time.Second) {
		t.Errorf("View and Update with the server down took %s, want them to fail fast", took)
	}

	c.pg.Start(t)
	if v, err := get(); err != nil || v != "1" {
		t.Errorf("first View after the restart = %q, %v; want 1 (nothing of the interrupted Update kept)", v, err)
	}
	if err := put("2"); err != nil {
		t.Errorf("first Update after the restart: %v", err)
	}
	if v, err := get(); err != nil || v != "2" {
		t.Errorf("View after the restart = %q, %v, want 2", v, err)
	}
	var k2 []byte
	if err := s.View(t.Context(), func(tx store.Tx) error { k2 = tx.Bucket("kv").Get([]byte("k2")); return nil }); err != nil || k2 != nil {
		t.Errorf("k2 = %q, %v; the interrupted Update was half kept", k2, err)
	}
}
