package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/storetest"
)

// childEnv makes the test binary act as a second process that tries to
// open the file named by the variable, and exit with one of the codes
// below.
const childEnv = "AUTHSRV_BOLT_TEST_CHILD_OPEN"

const (
	childOpened = 10
	childLocked = 11
	childFailed = 12
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(childOpen(path))
	}
	if path := os.Getenv(fsizeChildEnv); path != "" {
		os.Exit(childFileSizeLimit(path))
	}
	os.Exit(m.Run())
}

func childOpen(path string) int {
	db, err := bolt.Open(path, bolt.Options{Timeout: 500 * time.Millisecond})
	switch {
	case errors.Is(err, store.ErrLocked):
		fmt.Fprintln(os.Stderr, err)
		return childLocked
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return childFailed
	}
	_ = db.Close()
	return childOpened
}

func openSynced(t *testing.T, path string, opts bolt.Options) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	t.Run("Open", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			return openSynced(t, filepath.Join(t.TempDir(), "authsrv.db"), bolt.Options{})
		})
	})
	t.Run("OpenForTest", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			return bolt.OpenForTest(t, filepath.Join(t.TempDir(), "authsrv.db"))
		})
	})
	t.Run("NoGroupCommit", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			db, err := bolt.OpenNoSync(filepath.Join(t.TempDir(), "authsrv.db"), bolt.Options{MaxBatch: 1})
			if err != nil {
				t.Fatal(err)
			}
			return db // Run closes it
		})
	})
}

// TestOpenAlwaysSyncs guards reliability spec A15: production stores sync
// every commit, and Options cannot say otherwise.
func TestOpenAlwaysSyncs(t *testing.T) {
	db := openSynced(t, filepath.Join(t.TempDir(), "a.db"), bolt.Options{})
	if noSync, noGrowSync, noFreelistSync := bolt.SyncFlags(db); noSync || noGrowSync || noFreelistSync {
		t.Errorf("Open: NoSync=%v NoGrowSync=%v NoFreelistSync=%v, want all false", noSync, noGrowSync, noFreelistSync)
	}
	test := bolt.OpenForTest(t, filepath.Join(t.TempDir(), "b.db"))
	if noSync, noGrowSync, noFreelistSync := bolt.SyncFlags(test); !noSync || noGrowSync || noFreelistSync {
		t.Errorf("OpenForTest: NoSync=%v NoGrowSync=%v NoFreelistSync=%v, want only NoSync", noSync, noGrowSync, noFreelistSync)
	}
	var fields []string
	typ := reflect.TypeFor[bolt.Options]()
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	if got := strings.Join(fields, ","); got != "Timeout,FileMode,MaxBatch,ProbeInterval,ResidentLimit,ResidentInterval,OnCommit" {
		t.Errorf("Options fields = %s; a new field must not switch off syncing (A15)", got)
	}
}

func TestOpenOptions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	db := openSynced(t, path, bolt.Options{})
	if db.Path() != path {
		t.Errorf("Path() = %s, want %s", db.Path(), path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new file mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	for _, opts := range []bolt.Options{{Timeout: -time.Second}, {MaxBatch: -1}, {ProbeInterval: -time.Second}} {
		if db, err := bolt.Open(filepath.Join(dir, "bad.db"), opts); err == nil {
			_ = db.Close()
			t.Errorf("Open(%+v) = nil error, want one", opts)
		}
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not a bolt file "), 1024), 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := bolt.Open(junk, bolt.Options{}); err == nil || errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), junk) {
		if db != nil {
			_ = db.Close()
		}
		t.Errorf("Open(junk) = %v, want an error naming the file that is not ErrLocked", err)
	}
}

func TestOpenLockedInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	first := openSynced(t, path, bolt.Options{})
	const timeout = 300 * time.Millisecond
	start := time.Now()
	db, err := bolt.Open(path, bolt.Options{Timeout: timeout})
	elapsed := time.Since(start)
	if err == nil {
		_ = db.Close()
		t.Fatal("second Open of a held file succeeded")
	}
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	want := "open " + path + ": data is in use by another process (is another authsrv running on this data directory?)"
	if err.Error() != want {
		t.Errorf("error text = %q, want %q", err, want)
	}
	if elapsed > timeout+time.Second {
		t.Errorf("second Open gave up after %v, want about %v", elapsed, timeout)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := openSynced(t, path, bolt.Options{Timeout: timeout})
	_ = again.Close()
}

func TestOpenLockedByAnotherProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot re-run the test binary: %v", err)
	}
	path := filepath.Join(t.TempDir(), "a.db")
	child := func() (int, string, time.Duration) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), childEnv+"="+path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("child: %v (stderr %q)", err, stderr.String())
		}
		return exit.ExitCode(), strings.TrimSpace(stderr.String()), time.Since(start)
	}

	db := openSynced(t, path, bolt.Options{})
	code, msg, elapsed := child()
	if code != childLocked {
		t.Fatalf("child exited %d (%s), want %d (locked)", code, msg, childLocked)
	}
	if want := "open " + path + ": data is in use by another process (is another authsrv running on this data directory?)"; msg != want {
		t.Errorf("child's error = %q, want %q", msg, want)
	}
	if elapsed > 5*time.Second {
		t.Errorf("child took %v to give up", elapsed)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code, msg, _ := child(); code != childOpened {
		t.Errorf("after Close the child exited %d (%s), want %d (opened)", code, msg, childOpened)
	}
}

// TestSnapshotWhileWriting takes copies while four writers keep two
// counters and a record count equal, then opens each copy as a store.
func TestSnapshotWhileWriting(t *testing.T) {
	dir := t.TempDir()
	db := openSynced(t, filepath.Join(dir, "a.db"), bolt.Options{})
	var commits atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := db.Update(context.Background(), func(tx store.Tx) error {
					a, b := tx.Bucket("a"), tx.Bucket("b")
					n := store.KeyUint64(a.Get([]byte("n")))
					if m := store.KeyUint64(b.Get([]byte("n"))); m != n {
						return fmt.Errorf("a=%d b=%d", n, m)
					}
					seq, err := tx.Bucket("r").NextSequence()
					if err != nil {
						return err
					}
					if err := tx.Bucket("r").Put(store.Uint64Key(seq), bytes.Repeat([]byte{'r'}, 300)); err != nil {
						return err
					}
					if err := a.Put([]byte("n"), store.Uint64Key(n+1)); err != nil {
						return err
					}
					return b.Put([]byte("n"), store.Uint64Key(n+1))
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				commits.Add(1)
			}
		})
	}
	var snaps []string
	for i := range 4 {
		for want := commits.Load() + 20; commits.Load() < want; {
			time.Sleep(time.Millisecond)
		}
		p := filepath.Join(dir, fmt.Sprintf("snap%d.db", i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		n, err := db.Snapshot(t.Context(), f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if fi, serr := os.Stat(p); err != nil || serr != nil || fi.Size() != n {
			t.Fatalf("Snapshot = %d, %v; file %v, %v", n, err, fi, serr)
		}
		snaps = append(snaps, p)
	}
	close(stop)
	wg.Wait()

	var last uint64
	for _, p := range snaps {
		cp := openSynced(t, p, bolt.Options{})
		if err := bolt.Check(cp); err != nil {
			t.Errorf("%s: check: %v", p, err)
		}
		if err := cp.View(t.Context(), func(tx store.Tx) error {
			a := store.KeyUint64(tx.Bucket("a").Get([]byte("n")))
			b := store.KeyUint64(tx.Bucket("b").Get([]byte("n")))
			seq := tx.Bucket("r").Sequence()
			records := uint64(0)
			_ = tx.Bucket("r").ForEach(nil, func(_, _ []byte) error { records++; return nil })
			if a != b || a != seq || a != records {
				t.Errorf("%s: a=%d b=%d sequence=%d records=%d, want all equal", p, a, b, seq, records)
			}
			if a < 20 || a <= last {
				t.Errorf("%s: a=%d after a=%d in the previous copy: writers were not running", p, a, last)
			}
			last = a
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
}

// pile holds the leader of the next batch in the hook while the test
// queues more calls, so that the batch's make-up is known.
type pile struct {
	t        *testing.T
	db       *bolt.DB
	batches  atomic.Int32
	entered  chan struct{}
	released chan struct{}
}

func newPile(t *testing.T, opts bolt.Options) *pile {
	p := &pile{
		t:        t,
		db:       openSynced(t, filepath.Join(t.TempDir(), "a.db"), opts),
		entered:  make(chan struct{}),
		released: make(chan struct{}),
	}
	bolt.SetBeforeBatch(p.db, func() {
		if p.batches.Add(1) == 1 {
			close(p.entered)
			<-p.released
		}
	})
	return p
}

// start runs Update(fn) on a new goroutine and waits until the call is
// queued (the first one: until it leads and is held).
func (p *pile) start(fn func(store.Tx) error) <-chan error {
	p.t.Helper()
	queued := bolt.Pending(p.db)
	res := make(chan error, 1)
	go func() { res <- p.db.Update(context.Background(), fn) }()
	if queued == 0 {
		<-p.entered
		return res
	}
	deadline := time.Now().Add(5 * time.Second)
	for bolt.Pending(p.db) != queued+1 {
		if time.Now().After(deadline) {
			p.t.Fatalf("call was not queued: %d pending", bolt.Pending(p.db))
		}
		time.Sleep(100 * time.Microsecond)
	}
	return res
}

func (p *pile) release() { close(p.released) }

func (p *pile) counter(t *testing.T, key string) uint64 {
	t.Helper()
	var n uint64
	if err := p.db.View(t.Context(), func(tx store.Tx) error {
		n = store.KeyUint64(tx.Bucket("c").Get([]byte(key)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func counting(runs *atomic.Int32, key string, fail error) func(store.Tx) error {
	return func(tx store.Tx) error {
		runs.Add(1)
		b := tx.Bucket("c")
		if err := b.Put([]byte(key), store.Uint64Key(store.KeyUint64(b.Get([]byte(key)))+1)); err != nil {
			return err
		}
		return fail
	}
}

// TestUpdateMayRunMoreThanOnce shows the rule in store's package comment:
// a function batched with a failing one runs again, and its effect is
// still applied once.
func TestUpdateMayRunMoreThanOnce(t *testing.T) {
	p := newPile(t, bolt.Options{})
	errFail := errors.New("fail")
	var leadRuns, okRuns, failRuns atomic.Int32
	lead := p.start(counting(&leadRuns, "lead", nil))
	ok := p.start(counting(&okRuns, "ok", nil))
	fail := p.start(counting(&failRuns, "fail", errFail))
	p.release()
	if err := <-lead; err != nil {
		t.Errorf("leader: %v", err)
	}
	if err := <-ok; err != nil {
		t.Errorf("succeeding call: %v", err)
	}
	if err := <-fail; err != errFail {
		t.Errorf("failing call = %v, want errFail", err)
	}
	// [lead ok fail] fails at fail: fail runs again alone, then [lead ok]
	// run again together.
	if l, o, f := leadRuns.Load(), okRuns.Load(), failRuns.Load(); l != 2 || o != 2 || f != 2 {
		t.Errorf("runs: lead %d, ok %d, fail %d; want 2 each", l, o, f)
	}
	if l, o, f := p.counter(t, "lead"), p.counter(t, "ok"), p.counter(t, "fail"); l != 1 || o != 1 || f != 0 {
		t.Errorf("effects: lead %d, ok %d, fail %d; want 1, 1, 0", l, o, f)
	}
}

// TestFailingFirstRunsOnce: a function that fails first in its batch saw
// only committed data, so its run counts and it is not run again; a lone
// failing function runs once.
func TestFailingFirstRunsOnce(t *testing.T) {
	p := newPile(t, bolt.Options{})
	errFail := errors.New("fail")
	var failRuns, aRuns, bRuns atomic.Int32
	fail := p.start(counting(&failRuns, "fail", errFail))
	a := p.start(counting(&aRuns, "a", nil))
	b := p.start(counting(&bRuns, "b", nil))
	p.release()
	if err := <-fail; err != errFail {
		t.Errorf("failing call = %v", err)
	}
	if err := errors.Join(<-a, <-b); err != nil {
		t.Errorf("succeeding calls: %v", err)
	}
	if f, a, b := failRuns.Load(), aRuns.Load(), bRuns.Load(); f != 1 || a != 1 || b != 1 {
		t.Errorf("runs: fail %d, a %d, b %d; want 1 each", f, a, b)
	}
	if err := p.db.Update(t.Context(), counting(&failRuns, "fail", errFail)); err != errFail || failRuns.Load() != 2 {
		t.Errorf("lone failing Update = %v after %d runs in all, want errFail after 2", err, failRuns.Load())
	}
	if f, a, b := p.counter(t, "fail"), p.counter(t, "a"), p.counter(t, "b"); f != 0 || a != 1 || b != 1 {
		t.Errorf("effects: fail %d, a %d, b %d; want 0, 1, 1", f, a, b)
	}
}

// TestFailingAloneMaySucceed: a function that failed only because of what
// an earlier one in its batch wrote succeeds when it runs alone.
func TestFailingAloneMaySucceed(t *testing.T) {
	p := newPile(t, bolt.Options{})
	claim := func(who string) func(store.Tx) error {
		return func(tx store.Tx) error {
			b := tx.Bucket("claims")
			if v := b.Get([]byte("slot")); v != nil {
				return fmt.Errorf("slot taken by %s", v)
			}
			return b.Put([]byte("slot"), []byte(who))
		}
	}
	lead := p.start(func(store.Tx) error { return nil })
	first := p.start(claim("first"))
	second := p.start(claim("second"))
	p.release()
	// [lead first second]: second fails (first holds the slot in the
	// batch), runs alone and gets the free slot; then [lead first] runs
	// again and first now fails, alone, as authoritative.
	if err := errors.Join(<-lead, <-second); err != nil {
		t.Errorf("lead, second: %v", err)
	}
	if err := <-first; err == nil || err.Error() != "slot taken by second" {
		t.Errorf("first = %v, want slot taken by second", err)
	}
}

func TestMaxBatch(t *testing.T) {
	for _, tc := range []struct{ maxBatch, calls, batches int }{
		{0, 6, 1}, {1, 6, 6}, {4, 6, 2},
	} {
		t.Run(fmt.Sprint(tc.maxBatch), func(t *testing.T) {
			p := newPile(t, bolt.Options{MaxBatch: tc.maxBatch})
			var runs atomic.Int32
			var res []<-chan error
			for range tc.calls {
				res = append(res, p.start(counting(&runs, "n", nil)))
			}
			p.release()
			for _, r := range res {
				if err := <-r; err != nil {
					t.Error(err)
				}
			}
			if got := int(p.batches.Load()); got != tc.batches {
				t.Errorf("%d batches, want %d", got, tc.batches)
			}
			if n := p.counter(t, "n"); n != uint64(tc.calls) || runs.Load() != int32(tc.calls) {
				t.Errorf("counter %d after %d runs, want %d", n, runs.Load(), tc.calls)
			}
		})
	}
}

func TestPanicError(t *testing.T) {
	db := bolt.OpenForTest(t, filepath.Join(t.TempDir(), "a.db"))
	errInner := errors.New("inner")
	for name, run := range map[string]func(context.Context, func(store.Tx) error) error{"View": db.View, "Update": db.Update} {
		err := run(t.Context(), func(store.Tx) error { panic(errInner) })
		var pe *bolt.PanicError
		if !errors.As(err, &pe) || !errors.Is(err, errInner) || len(pe.Stack) == 0 {
			t.Errorf("%s: panic(err) returned %v, want a *PanicError with a stack wrapping err", name, err)
		}
	}
}

// TestGoexit: a function that calls runtime.Goexit (as t.FailNow does)
// ends its caller's goroutine, and nobody else's, and the store goes on.
func TestGoexit(t *testing.T) {
	goexit := func(tx store.Tx) error {
		_ = tx.Bucket("c").Put([]byte("goexit"), []byte("x"))
		runtime.Goexit()
		return nil
	}
	// startGoexit runs Update(goexit) and reports whether Update returned.
	startGoexit := func(db *bolt.DB, queue func(func())) <-chan bool {
		ended := make(chan bool, 1)
		queue(func() {
			returned := false
			defer func() { ended <- returned }()
			_ = db.Update(context.Background(), goexit)
			returned = true
		})
		return ended
	}

	t.Run("Alone", func(t *testing.T) {
		db := bolt.OpenForTest(t, filepath.Join(t.TempDir(), "a.db"))
		if <-startGoexit(db, func(f func()) { go f() }) {
			t.Error("Update returned after its function called Goexit")
		}
		var runs atomic.Int32
		if err := db.Update(t.Context(), counting(&runs, "n", nil)); err != nil {
			t.Fatalf("Update after Goexit: %v", err)
		}
	})
	t.Run("Batched", func(t *testing.T) {
		p := newPile(t, bolt.Options{})
		var leadRuns, okRuns atomic.Int32
		lead := p.start(counting(&leadRuns, "lead", nil))
		ok := p.start(counting(&okRuns, "ok", nil))
		ended := startGoexit(p.db, func(f func()) {
			queued := bolt.Pending(p.db)
			go f()
			for bolt.Pending(p.db) != queued+1 {
				time.Sleep(100 * time.Microsecond)
			}
		})
		p.release()
		if <-ended {
			t.Error("Update returned after its function called Goexit")
		}
		if err := errors.Join(<-lead, <-ok); err != nil {
			t.Errorf("other calls in the batch: %v", err)
		}
		if l, o := p.counter(t, "lead"), p.counter(t, "ok"); l != 1 || o != 1 {
			t.Errorf("effects: lead %d, ok %d; want 1 each", l, o)
		}
		if err := p.db.View(t.Context(), func(tx store.Tx) error {
			if v := tx.Bucket("c").Get([]byte("goexit")); v != nil {
				return errors.New("the Goexit function's write was kept")
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
}

// TestCloseWhileWriting: Close waits for queued calls; every Update that
// returned nil is on disk, and later ones get ErrClosed.
func TestCloseWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var done []string
	var wg sync.WaitGroup
	var started atomic.Int32
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				k := fmt.Sprintf("%d/%d", g, i)
				started.Add(1)
				err := db.Update(context.Background(), func(tx store.Tx) error {
					return tx.Bucket("k").Put([]byte(k), nil)
				})
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				mu.Lock()
				done = append(done, k)
				mu.Unlock()
			}
		})
	}
	for started.Load() < 50 {
		time.Sleep(time.Millisecond)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := db.View(t.Context(), func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close = %v", err)
	}
	db = openSynced(t, path, bolt.Options{})
	if err := db.View(t.Context(), func(tx store.Tx) error {
		for _, k := range done {
			if tx.Bucket("k").Get([]byte(k)) == nil {
				t.Errorf("%s was acknowledged but is missing", k)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(done) == 0 {
		t.Error("no Update finished before Close")
	}
}

// TestReopenKeepsData: a store's committed data survives Close and Open.
func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	db := openSynced(t, path, bolt.Options{})
	if err := db.Update(t.Context(), func(tx store.Tx) error {
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return tx.Bucket("kv").Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openSynced(t, path, bolt.Options{})
	if err := db.View(t.Context(), func(tx store.Tx) error {
		if v := tx.Bucket("kv").Get([]byte("k")); string(v) != "v" || store.ConfigRevision(tx) != 1 {
			return fmt.Errorf("after reopen k=%q revision=%d", v, store.ConfigRevision(tx))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestLimits(t *testing.T) {
	db := bolt.OpenForTest(t, filepath.Join(t.TempDir(), "a.db"))
	err := db.Update(t.Context(), func(tx store.Tx) error {
		return tx.Bucket("kv").Put(bytes.Repeat([]byte{'k'}, 40000), []byte("v"))
	})
	if err == nil || !strings.Contains(err.Error(), `bucket "kv"`) || !strings.Contains(err.Error(), "key too large") {
		t.Errorf("Put of a 40000-byte key = %v, want a key-too-large error naming the bucket", err)
	}
	err = db.Update(t.Context(), func(tx store.Tx) error {
		return tx.Bucket("").Put([]byte("k"), []byte("v"))
	})
	if err == nil {
		t.Error("Put into a bucket with an empty name succeeded")
	}
}

// cancelingWriter cancels its context after the first write.
type cancelingWriter struct {
	cancel context.CancelFunc
	n      int
}

func (w *cancelingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	w.cancel()
	return len(p), nil
}

func TestSnapshotStopsWhenCanceled(t *testing.T) {
	db := bolt.OpenForTest(t, filepath.Join(t.TempDir(), "a.db"))
	if err := db.Update(t.Context(), func(tx store.Tx) error {
		return tx.Bucket("big").Put([]byte("k"), make([]byte, 1<<20))
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w := &cancelingWriter{cancel: cancel}
	n, err := db.Snapshot(ctx, w)
	if !errors.Is(err, context.Canceled) || n != int64(w.n) || n >= 1<<20 {
		t.Errorf("Snapshot = %d, %v after %d bytes, want context.Canceled early", n, err, w.n)
	}
}
