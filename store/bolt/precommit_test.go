package bolt_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// sumKey is the PreCommit key of the tests: the functions of one commit
// add to one sum, which one hook writes once.
type sumKey struct{}

// adding returns a function that adds n to the commit's sum (and fails
// with fail); the hook writes the sum under "sum" and counts its runs.
func adding(n uint64, hooks *atomic.Int32, fail, hookFail error) func(store.Tx) error {
	return func(tx store.Tx) error {
		pc, ok := tx.(store.PreCommitter)
		if !ok {
			return errors.New("a bolt write transaction is not a store.PreCommitter")
		}
		sum := pc.PreCommit(sumKey{}, func() (any, func(store.Tx) error) {
			s := new(uint64)
			return s, func(tx store.Tx) error {
				hooks.Add(1)
				if hookFail != nil {
					return hookFail
				}
				b := tx.Bucket("c")
				return b.Put([]byte("sum"), store.Uint64Key(store.KeyUint64(b.Get([]byte("sum")))+*s))
			}
		}).(*uint64)
		*sum += n
		return fail
	}
}

// TestPreCommitOncePerCommit: the functions of one batch share the value
// and its hook runs once, after all of them, in the same commit.
func TestPreCommitOncePerCommit(t *testing.T) {
	p := newPile(t, bolt.Options{})
	var hooks atomic.Int32
	res := []<-chan error{p.start(adding(1, &hooks, nil, nil)), p.start(adding(2, &hooks, nil, nil)), p.start(adding(4, &hooks, nil, nil))}
	p.release()
	for _, r := range res {
		if err := <-r; err != nil {
			t.Fatal(err)
		}
	}
	if got := p.counter(t, "sum"); got != 7 {
		t.Errorf("sum %d, want 7", got)
	}
	if n := hooks.Load(); n != 1 || p.batches.Load() != 1 {
		t.Errorf("%d hook runs in %d batches, want 1 in 1", n, p.batches.Load())
	}
}

// TestPreCommitRerun: when a function fails, the values and hooks of the
// rolled-back run are dropped; the others run again with fresh ones, so
// nothing is counted twice and nothing of the failed one is kept.
func TestPreCommitRerun(t *testing.T) {
	p := newPile(t, bolt.Options{})
	var hooks atomic.Int32
	errFail := errors.New("fail")
	lead := p.start(adding(1, &hooks, nil, nil))
	a := p.start(adding(10, &hooks, nil, nil))
	fail := p.start(adding(100, &hooks, errFail, nil))
	b := p.start(adding(1000, &hooks, nil, nil))
	p.release()
	if err := errors.Join(<-lead, <-a, <-b); err != nil {
		t.Fatal(err)
	}
	if err := <-fail; err != errFail {
		t.Errorf("failing call = %v, want errFail", err)
	}
	if got := p.counter(t, "sum"); got != 1011 {
		t.Errorf("sum %d, want 1011", got)
	}
}

// TestPreCommitHookFails: a hook's error is the error of the function
// that registered it (the first to ask for the key), which runs again
// alone; the others commit, with a hook of their own.
func TestPreCommitHookFails(t *testing.T) {
	p := newPile(t, bolt.Options{})
	var hooks atomic.Int32
	errHook := errors.New("hook")
	bad := p.start(adding(1, &hooks, nil, errHook))
	a := p.start(adding(10, &hooks, nil, nil))
	b := p.start(adding(100, &hooks, nil, nil))
	p.release()
	if err := errors.Join(<-a, <-b); err != nil {
		t.Fatal(err)
	}
	if err := <-bad; err != errHook {
		t.Errorf("call whose hook fails = %v, want errHook", err)
	}
	if got := p.counter(t, "sum"); got != 110 {
		t.Errorf("sum %d, want 110", got)
	}
	// [bad a b] fails in bad's hook; bad alone fails again; [a b] commit.
	if n := hooks.Load(); n != 3 {
		t.Errorf("%d hook runs, want 3", n)
	}
}

// TestPreCommitView: in a read transaction PreCommit hands out the value
// and runs no hook.
func TestPreCommitView(t *testing.T) {
	db := bolt.OpenForTest(t, t.TempDir()+"/v.db")
	ran := false
	err := db.View(t.Context(), func(tx store.Tx) error {
		v := tx.(store.PreCommitter).PreCommit(sumKey{}, func() (any, func(store.Tx) error) {
			return 5, func(store.Tx) error { ran = true; return nil }
		})
		if v != 5 {
			t.Errorf("value %v, want 5", v)
		}
		return nil
	})
	if err != nil || ran {
		t.Errorf("View: %v, hook ran %v", err, ran)
	}
}
