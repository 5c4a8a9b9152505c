package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/authsrv/authsrv/store"
)

// Defaults for the zero Options.
const (
	DefaultTimeout  = 2 * time.Second
	DefaultFileMode = os.FileMode(0o600)
	DefaultMaxBatch = 256
	// DefaultProbeInterval is how often a store whose writes fail tries a
	// probe write.
	DefaultProbeInterval = 2 * time.Second
	// initialMmapSize is the address space mapped at open (see Open).
	initialMmapSize = 1 << 30
)

// Options tunes Open. The zero value is ready to use.
type Options struct {
	// Timeout is how long Open waits for the file lock that another process
	// may hold. 0 means DefaultTimeout; there is no way to wait forever,
	// so a second server on the same data fails instead of hanging.
	Timeout time.Duration
	// FileMode is the mode of a newly created file. 0 means 0600.
	FileMode os.FileMode
	// MaxBatch is the most Update calls committed in one transaction.
	// 0 means DefaultMaxBatch; 1 turns group commit off.
	MaxBatch int
	// ProbeInterval is how often, while commits are refused (disk full),
	// a probe write checks whether writes work again. 0 means
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// ResidentLimit bounds the store file's pages kept mapped in the
	// process (see resident.go): past it they are unmapped, and stay in
	// the page cache. 0 means no limit.
	ResidentLimit int64
	// ResidentInterval is how often the resident pages are counted. 0
	// means DefaultResidentInterval.
	ResidentInterval time.Duration
	// OnCommit, when set, is told how long each successful commit took
	// (bbolt's write and fsync of one batch). It runs in the committing
	// writer, with the other writers waiting: it must not block.
	OnCommit func(time.Duration)
}

// DB is a store.Store on one bbolt file. It is safe for concurrent use.
type DB struct {
	bdb      *bbolt.DB
	path     string
	maxBatch int

	// health is the write state; probeEvery paces the probe that runs
	// while commits are refused (see probe.go).
	health     store.WriteHealth
	probeEvery time.Duration

	// life holds the calls (View, Update, Snapshot) and the background
	// goroutines (the probe, the resident trim) that Close waits for.
	life store.Lifecycle

	// mu guards the Update queue.
	mu      sync.Mutex
	leading bool    // a caller is running a batch
	pending []*call // queued Update calls, oldest first

	// beforeBatch, when set (tests only), runs in the leader before it
	// takes its batch from the queue.
	beforeBatch func()
	// onCommit is Options.OnCommit.
	onCommit func(time.Duration)
}

var (
	_ store.Store       = (*DB)(nil)
	_ store.Snapshotter = (*DB)(nil)
)

// lockedError is returned by Open when another process holds the file.
type lockedError struct{ path string }

func (e *lockedError) Error() string {
	return fmt.Sprintf("open %s: data is in use by another process (is another authsrv running on this data directory?)", e.path)
}

func (e *lockedError) Unwrap() error { return store.ErrLocked }

// Open opens or creates the store file at path. Every commit is synced to
// disk. When another process holds the file, Open gives up after
// opts.Timeout with an error that wraps store.ErrLocked.
func Open(path string, opts Options) (*DB, error) {
	return open(path, opts, false)
}

// OpenForTest opens a store without fsync, which is fast and loses data on
// a crash: it is the only way to get such a store. It fails tb on error and
// closes the store when the test ends.
func OpenForTest(tb testing.TB, path string) *DB {
	tb.Helper()
	db, err := open(path, Options{}, true)
	if err != nil {
		tb.Fatalf("store/bolt: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("store/bolt: close %s: %v", path, err)
		}
	})
	return db
}

func open(path string, opts Options, noSync bool) (*DB, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("open %s: negative lock timeout %v", path, opts.Timeout)
	}
	if opts.MaxBatch < 0 {
		return nil, fmt.Errorf("open %s: negative MaxBatch %d", path, opts.MaxBatch)
	}
	if opts.ProbeInterval < 0 {
		return nil, fmt.Errorf("open %s: negative ProbeInterval %v", path, opts.ProbeInterval)
	}
	if opts.ResidentLimit < 0 || opts.ResidentInterval < 0 {
		return nil, fmt.Errorf("open %s: negative ResidentLimit or ResidentInterval", path)
	}
	if opts.ResidentInterval == 0 {
		opts.ResidentInterval = DefaultResidentInterval
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.FileMode == 0 {
		opts.FileMode = DefaultFileMode
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)

	bdb, err := bbolt.Open(path, opts.FileMode, &bbolt.Options{
		Timeout: opts.Timeout,
		// The hashmap freelist stays fast when the file is fragmented
		// (etcd's choice); it does not change the file format.
		FreelistType: bbolt.FreelistMapType,
		NoSync:       noSync,
		// Reserve address space for the map up front: a commit that has to
		// grow the map waits for every open read transaction, so a long
		// backup would otherwise stall writers. This is virtual memory,
		// not resident memory.
		InitialMmapSize: initialMmapSize,
		// NoGrowSync and NoFreelistSync stay false: both trade crash
		// safety for speed (reliability spec A15).
	})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &lockedError{path: path}
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if created && !noSync {
		// Make the new file's directory entry durable too.
		if err := syncDir(filepath.Dir(path)); err != nil {
			_ = bdb.Close()
			return nil, fmt.Errorf("open %s: sync directory: %w", path, err)
		}
	}
	db := &DB{bdb: bdb, path: path, maxBatch: opts.MaxBatch, probeEvery: opts.ProbeInterval, onCommit: opts.OnCommit}
	db.startResidentTrim(opts.ResidentLimit, opts.ResidentInterval)
	return db, nil
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be synced there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path returns the file name the store was opened with.
func (db *DB) Path() string { return db.path }

// Close waits for running calls to finish and closes the file. Later calls
// return store.ErrClosed; Close itself may be called any number of times
// and always returns the first call's result. It must not be called from
// inside a View or Update function.
func (db *DB) Close() error {
	return db.life.Close(func() error {
		if err := db.bdb.Close(); err != nil {
			return fmt.Errorf("close %s: %w", db.path, err)
		}
		return nil
	})
}

// View runs fn in a read-only transaction that sees one consistent
// snapshot. Writes in it return store.ErrReadOnly. fn's error is returned
// as is; a panic in fn is returned as a *PanicError.
//
// Slices that fn gets from the transaction are valid only until fn returns.
// fn must not call Update or Close on the same DB: a write that has to grow
// the file waits for open read transactions, so it would wait forever.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := db.life.Begin(ctx); err != nil {
		return err
	}
	defer db.life.Done()
	btx, err := db.bdb.Begin(false)
	if err != nil {
		return mapErr(err)
	}
	defer func() { _ = btx.Rollback() }()
	return safeCall(fn, newTx(btx))
}

// Update runs fn in a read-write transaction and returns only after the
// transaction is committed and synced to disk, or with the error that
// prevented it. fn's error is returned as is, and nothing fn wrote is kept;
// a panic in fn is returned as a *PanicError, with the same effect.
//
// The function passed to Update may run more than once. Concurrent calls are
// committed together in one transaction; when one of them fails, the
// transaction is rolled back, the failing function is run again alone
// unless it ran first (that run's result is the one its caller gets), and
// the others are run again in a new transaction. Only the last run's writes
// are committed. So fn must compute everything from the transaction and
// have no effect outside it. fn may run on another caller's goroutine; if
// it calls runtime.Goexit (as t.FailNow does), its own caller's goroutine
// exits and the other callers are not affected.
//
// When ctx is already done, Update returns its error without running fn.
// Once queued, the call waits for its result. Slices that fn gets from the
// transaction are valid only until fn returns. fn must not call View,
// Update or Close on the same DB.
//
// A commit the storage refuses (disk full, file size limit, I/O error)
// returns a *store.WriteError, which wraps store.ErrWriteFailed and the
// operating system's error; WriteHealth tracks it (see probe.go).
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	return db.update(ctx, fn, false)
}

// update is Update; probe marks the write probe.
func (db *DB) update(ctx context.Context, fn func(store.Tx) error, probe bool) error {
	if err := db.life.Begin(ctx); err != nil {
		return err
	}
	defer db.life.Done()
	c := &call{fn: fn, wake: make(chan struct{}, 1), probe: probe}
	db.mu.Lock()
	db.pending = append(db.pending, c)
	lead := !db.leading
	db.leading = true
	db.mu.Unlock()

	if !lead {
		<-c.wake
	}
	if !c.done {
		// Either no batch was running or the previous leader handed over:
		// c is first in the queue, so the batch taken now includes it.
		db.lead(c)
	}
	if c.err == errGoexit {
		runtime.Goexit() // fn did this; finish the job on the caller's goroutine
	}
	return c.err
}

// Snapshot writes a consistent copy of the whole file to w, from one read
// transaction, while other calls go on. The copy is a bbolt file that Open
// accepts. It stops when ctx is done.
func (db *DB) Snapshot(ctx context.Context, w io.Writer) (int64, error) {
	if err := db.life.Begin(ctx); err != nil {
		return 0, err
	}
	defer db.life.Done()
	btx, err := db.bdb.Begin(false)
	if err != nil {
		return 0, mapErr(err)
	}
	defer func() { _ = btx.Rollback() }()
	n, err := btx.WriteTo(&ctxWriter{ctx: ctx, w: w})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return n, ctxErr
		}
		return n, fmt.Errorf("snapshot %s: %w", db.path, err)
	}
	return n, nil
}

type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (cw *ctxWriter) Write(p []byte) (int, error) {
	if err := cw.ctx.Err(); err != nil {
		return 0, err
	}
	return cw.w.Write(p)
}

// PanicError is returned by View and Update when the function passed to
// them panics. The transaction is rolled back and the store keeps working.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, for the log.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("store: transaction function panicked: %v", e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

func safeCall(fn func(store.Tx) error, tx store.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(tx)
}

// mapErr turns bbolt's errors into the store's where one fits.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return store.ErrClosed
	case errors.Is(err, berrors.ErrTxNotWritable), errors.Is(err, berrors.ErrDatabaseReadOnly):
		return store.ErrReadOnly
	}
	return err
}
