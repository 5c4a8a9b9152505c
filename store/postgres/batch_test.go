package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/postgres"
)

// holdFirstBatch makes the first batch's leader wait until n calls are
// queued (itself included), so that the first batch holds them all.
func holdFirstBatch(s *postgres.Store, n int) {
	var once sync.Once
	postgres.SetBeforeBatch(s, func() {
		once.Do(func() {
			for postgres.Queued(s) < n {
				time.Sleep(time.Millisecond)
			}
		})
	})
}

// commitLog records the size of every commit.
type commitLog struct {
	mu    sync.Mutex
	sizes []int
}

func (l *commitLog) add(n int) {
	l.mu.Lock()
	l.sizes = append(l.sizes, n)
	l.mu.Unlock()
}

func (l *commitLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.sizes...)
}

// testBatchCommits: concurrent Update calls of one node share commits;
// no increment is lost or applied twice.
func testBatchCommits(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{MaxBatchTime: time.Hour})
	const goroutines, each = 64, 5
	var log commitLog
	postgres.SetOnCommit(s, log.add)
	holdFirstBatch(s, goroutines)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				if err := s.Update(t.Context(), increment); err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := counter(t, s); n != goroutines*each {
		t.Errorf("counter = %d, want %d", n, goroutines*each)
	}
	sizes := log.get()
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total != goroutines*each {
		t.Errorf("the commits held %d functions, want %d", total, goroutines*each)
	}
	if len(sizes) == 0 || sizes[0] != goroutines {
		t.Errorf("first commit sizes %v, want the first to hold all %d queued calls", sizes[:min(len(sizes), 5)], goroutines)
	}
	if len(sizes) > goroutines*each-goroutines+1 {
		t.Errorf("%d commits for %d updates: no group commit", len(sizes), goroutines*each)
	}
	t.Logf("%d commits for %d updates", len(sizes), goroutines*each)

	// MaxBatch bounds a batch.
	s2 := c.open(t, c.schema(t), postgres.Options{MaxBatch: 4, MaxBatchTime: time.Hour})
	var log2 commitLog
	postgres.SetOnCommit(s2, log2.add)
	holdFirstBatch(s2, 10)
	for range 10 {
		wg.Go(func() {
			if err := s2.Update(t.Context(), increment); err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	if sizes := log2.get(); len(sizes) < 3 || sizes[0] != 4 {
		t.Errorf("commit sizes with MaxBatch 4 = %v, want 4 first and at most 4 each", sizes)
	} else {
		for _, n := range sizes {
			if n > 4 {
				t.Errorf("commit sizes with MaxBatch 4 = %v", sizes)
			}
		}
	}
	if n := counter(t, s2); n != 10 {
		t.Errorf("counter = %d, want 10", n)
	}

	// MaxBatchTime bounds it too: with the least, a batch starts only
	// its first function, and puts the others back in the queue.
	s3 := c.open(t, c.schema(t), postgres.Options{MaxBatchTime: time.Nanosecond})
	var log3 commitLog
	postgres.SetOnCommit(s3, log3.add)
	holdFirstBatch(s3, 5)
	for range 5 {
		wg.Go(func() {
			if err := s3.Update(t.Context(), increment); err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	if sizes := log3.get(); fmt.Sprint(sizes) != "[1 1 1 1 1]" {
		t.Errorf("commit sizes with MaxBatchTime 1ns = %v, want five of 1", sizes)
	}
	if n := counter(t, s3); n != 5 {
		t.Errorf("counter = %d, want 5", n)
	}
}

type sumKey struct{}

// addToSum adds 1 to the commit's sum, which a hook writes once before
// the commit (as the audit log's head).
func addToSum(tx store.Tx) {
	v := tx.(store.PreCommitter).PreCommit(sumKey{}, func() (any, func(store.Tx) error) {
		n := new(int)
		return n, func(tx store.Tx) error {
			b := tx.Bucket("sum")
			return b.Put([]byte("n"), store.Uint64Key(store.KeyUint64(b.Get([]byte("n")))+uint64(*n)))
		}
	}).(*int)
	*v++
}

// testBatchFailures: in one batch, a function that returns an error, one
// that panics, one whose statement fails, and one that fails after
// using PreCommit are each undone alone and get their own error; the
// others commit, once each, and the PreCommit hook counts only them.
func testBatchFailures(t *testing.T, c *cluster) {
	schema := c.schema(t)
	s := c.open(t, schema, postgres.Options{MaxBatchTime: time.Hour})
	// The database refuses the key "bad": a failed statement of one
	// function.
	for _, stmt := range []string{
		`CREATE FUNCTION ` + schema + `.refuse_bad() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN IF NEW.key = 'bad'::bytea THEN RAISE EXCEPTION 'bad key'; END IF; RETURN NEW; END$$`,
		`CREATE TRIGGER refuse_bad BEFORE INSERT OR UPDATE ON ` + schema + `.authsrv_kv FOR EACH ROW EXECUTE FUNCTION ` + schema + `.refuse_bad()`,
	} {
		if _, err := c.admin.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	var log commitLog
	postgres.SetOnCommit(s, log.add)
	errOwn := errors.New("own error")
	type role int
	const (
		good role = iota
		fails
		panics
		badStatement
		failsShared
	)
	roles := []role{good, fails, good, panics, good, badStatement, good, failsShared, good}
	var runs [9]atomic.Int64
	holdFirstBatch(s, len(roles))
	errs := make([]error, len(roles))
	var wg sync.WaitGroup
	for i, r := range roles {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(tx store.Tx) error {
				runs[i].Add(1)
				if err := increment(tx); err != nil {
					return err
				}
				if err := tx.Bucket("k").Put(fmt.Appendf(nil, "%d", i), []byte("v")); err != nil {
					return err
				}
				if r == good || r == failsShared {
					addToSum(tx)
				}
				switch r {
				case fails, failsShared:
					return errOwn
				case panics:
					panic("boom")
				case badStatement:
					return tx.Bucket("k").Put([]byte("bad"), []byte("v"))
				}
				return nil
			})
		})
	}
	wg.Wait()
	wantGood := 0
	for i, r := range roles {
		err := errs[i]
		switch r {
		case good:
			wantGood++
			if err != nil {
				t.Errorf("call %d (good) = %v", i, err)
			}
		case fails, failsShared:
			if err != errOwn {
				t.Errorf("call %d (fails) = %v, want its own error", i, err)
			}
		case panics:
			if pe, ok := errors.AsType[*postgres.PanicError](err); !ok || pe.Value != "boom" {
				t.Errorf("call %d (panics) = %v, want a *PanicError", i, err)
			}
		case badStatement:
			if err == nil || !strings.Contains(err.Error(), "bad key") {
				t.Errorf("call %d (bad statement) = %v, want the database's error", i, err)
			}
		}
	}
	if n := counter(t, s); n != uint64(wantGood) {
		t.Errorf("counter = %d, want %d (the good calls only)", n, wantGood)
	}
	if err := s.View(t.Context(), func(tx store.Tx) error {
		for i, r := range roles {
			if got := tx.Bucket("k").Get(fmt.Appendf(nil, "%d", i)); (got != nil) != (r == good) {
				t.Errorf("call %d (role %d): key present = %v", i, r, got != nil)
			}
		}
		if got := store.KeyUint64(tx.Bucket("sum").Get([]byte("n"))); got != uint64(wantGood) {
			t.Errorf("hook's sum = %d, want %d", got, wantGood)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sizes := log.get()
	t.Logf("commit sizes %v", sizes)
	if len(sizes) > 3 {
		t.Errorf("commit sizes %v: the failures split the batch", sizes)
	}
}

// testBatchCancelled: a call whose ctx ends while it waits in the queue,
// or in its batch before its turn, returns the ctx's error, its function
// never runs, and the others commit.
func testBatchCancelled(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{MaxBatchTime: time.Hour})
	holdFirstBatch(s, 3)
	victimCtx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var victimRan atomic.Bool
	var wg sync.WaitGroup
	var errLeader, errVictim, errOther error
	wg.Go(func() {
		errLeader = s.Update(t.Context(), func(tx store.Tx) error {
			cancel() // the victim is in this batch, after this call
			return increment(tx)
		})
	})
	for postgres.Queued(s) < 1 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() {
		errVictim = s.Update(victimCtx, func(tx store.Tx) error {
			victimRan.Store(true)
			return increment(tx)
		})
	})
	for postgres.Queued(s) < 2 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() { errOther = s.Update(t.Context(), increment) })
	wg.Wait()
	if errLeader != nil || errOther != nil {
		t.Errorf("the others = %v, %v", errLeader, errOther)
	}
	if !errors.Is(errVictim, context.Canceled) || victimRan.Load() {
		t.Errorf("cancelled call = %v (ran %v), want context.Canceled without running", errVictim, victimRan.Load())
	}
	if n := counter(t, s); n != 2 {
		t.Errorf("counter = %d, want 2", n)
	}

	// Cancelled while queued behind a running batch.
	s2 := c.open(t, c.schema(t), postgres.Options{})
	inside, release := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		errLeader = s2.Update(t.Context(), func(tx store.Tx) error {
			close(inside)
			<-release
			return increment(tx)
		})
	})
	<-inside
	queuedCtx, cancelQueued := context.WithCancel(t.Context())
	victimRan.Store(false)
	done := make(chan error, 1)
	go func() {
		done <- s2.Update(queuedCtx, func(tx store.Tx) error {
			victimRan.Store(true)
			return increment(tx)
		})
	}()
	for postgres.Queued(s2) < 1 {
		time.Sleep(time.Millisecond)
	}
	cancelQueued()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("call cancelled in the queue = %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	if errLeader != nil || victimRan.Load() {
		t.Errorf("leader = %v, cancelled call ran = %v", errLeader, victimRan.Load())
	}
	if n := counter(t, s2); n != 1 {
		t.Errorf("counter = %d, want 1", n)
	}
	if postgres.Queued(s2) != 0 {
		t.Errorf("%d calls left in the queue", postgres.Queued(s2))
	}
}

// testBatchGoexit: a function that calls runtime.Goexit (t.FailNow does)
// ends its own caller's goroutine only; the other functions of its batch
// commit, and nothing of it is kept.
func testBatchGoexit(t *testing.T, c *cluster) {
	s := c.open(t, c.schema(t), postgres.Options{MaxBatchTime: time.Hour})
	holdFirstBatch(s, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	returned := make([]bool, 3)
	for i := range 3 {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(tx store.Tx) error {
				if err := increment(tx); err != nil {
					return err
				}
				if i == 1 {
					runtime.Goexit()
				}
				return nil
			})
			returned[i] = true
		})
		// In queue order; the last one releases the batch.
		for i < 2 && postgres.Queued(s) < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	for i := range 3 {
		if want := i != 1; returned[i] != want || errs[i] != nil {
			t.Errorf("call %d: returned %v (want %v), error %v", i, returned[i], want, errs[i])
		}
	}
	if n := counter(t, s); n != 2 {
		t.Errorf("counter = %d, want 2", n)
	}
}
