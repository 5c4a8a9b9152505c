package bolt

import (
	"errors"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/authsrv/authsrv/store"
)

// errGoexit is the result of an Update whose function called
// runtime.Goexit (t.FailNow does); Update then calls runtime.Goexit on its
// caller's goroutine.
var errGoexit = errors.New("store: Update function called runtime.Goexit")

// call is one queued Update.
type call struct {
	fn  func(store.Tx) error
	err error
	// probe marks the write probe (see probe.go).
	probe bool
	done  bool // err is final; set before wake
	// wake receives once: either the result is ready (done) or the caller
	// has been made the leader.
	wake chan struct{}
}

// lead takes the oldest queued calls (self first) as one batch, runs them,
// passes leadership to the next queued caller if there is one, and then
// wakes the batch's callers. Each leader runs exactly one batch, so nobody
// keeps serving other callers for long.
func (db *DB) lead(self *call) {
	if h := db.beforeBatch; h != nil {
		h()
	}
	db.mu.Lock()
	n := min(len(db.pending), db.maxBatch)
	batch := db.pending[:n:n]
	if n == len(db.pending) {
		db.pending = nil
	} else {
		db.pending = slices.Clone(db.pending[n:])
	}
	db.mu.Unlock()

	r := &batchRun{db: db, todo: slices.Clone(batch)}
	finished := false
	defer func() {
		if !finished {
			// self's function, run below on this goroutine, called
			// runtime.Goexit: the goroutine ends as asked, but the
			// transaction and the leadership must not go with it.
			r.abortGoexit()
		}
		db.handOff(self, batch)
	}()
	if len(batch) == 1 {
		r.run() // alone: on the caller's own goroutine
	} else {
		for len(r.todo) > 0 && !r.runGuarded() {
			r.abortGoexit()
		}
	}
	finished = true
}

// handOff makes the oldest queued caller the next leader, or records that
// none is running, and then wakes the callers of the finished batch.
func (db *DB) handOff(self *call, batch []*call) {
	db.mu.Lock()
	if len(db.pending) > 0 {
		db.pending[0].wake <- struct{}{} // buffered; never blocks
	} else {
		db.leading = false
	}
	db.mu.Unlock()
	for _, c := range batch {
		if c != self {
			c.wake <- struct{}{}
		}
	}
}

// batchRun is the state of one batch while it runs.
type batchRun struct {
	db      *DB
	todo    []*call   // calls without a result yet, in queue order
	btx     *bbolt.Tx // the open write transaction, if any
	running *call     // the call whose function is running, if any
}

// runGuarded runs a batch of several callers on a goroutine of its own, so
// that a function calling runtime.Goexit (t.FailNow does) ends only that
// goroutine and not another caller's. It reports whether the batch
// finished.
func (r *batchRun) runGuarded() bool {
	finished := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { finished <- ok }()
		r.run()
		ok = true
	}()
	return <-finished
}

// run commits r.todo. When a function fails, the transaction is rolled
// back, that function gets its own transaction (unless it was the first,
// whose run already saw nothing but committed data), and the rest are
// tried again together.
func (r *batchRun) run() {
	for len(r.todo) > 0 {
		failed, inHook, err := r.commit(r.todo)
		if failed < 0 {
			for _, c := range r.todo {
				c.err, c.done = err, true
			}
			r.todo = nil
			return
		}
		c := r.todo[failed]
		if failed > 0 || (inHook && len(r.todo) > 1) {
			// c saw the writes of the calls before it (or its hook, run
			// after all of them, did): only a run on its own is
			// authoritative. Whatever it returns now, with its writes
			// committed on success, is its result.
			_, _, err = r.commit([]*call{c})
		}
		c.err, c.done = err, true
		r.todo = slices.Delete(r.todo, failed, failed+1)
	}
}

// commit runs calls in one write transaction, then the hooks they
// registered with PreCommit, and commits it. When a function or a hook
// fails it rolls back and returns the index of that function (of the one
// that registered the hook, with inHook set) and the error; otherwise it
// returns -1 and the commit's error.
func (r *batchRun) commit(calls []*call) (failed int, inHook bool, err error) {
	btx, err := r.db.bdb.Begin(true)
	if err != nil {
		return -1, false, fmt.Errorf("begin %s: %w", r.db.path, mapErr(err))
	}
	r.btx = btx
	before := btx.Size()
	probe := false
	run := &store.PreCommits[int]{}
	fail := func(i int, hook bool, err error) (int, bool, error) {
		r.running = nil
		r.btx = nil
		_ = btx.Rollback()
		return i, hook, err
	}
	for i, c := range calls {
		probe = probe || c.probe
		r.running = c
		run.Owner = i
		t := newTx(btx)
		t.run = run
		if err := safeCall(c.fn, t); err != nil {
			return fail(i, false, err)
		}
	}
	run.Hooking = true
	for _, h := range run.Hooks {
		r.running = calls[h.Owner]
		t := newTx(btx)
		t.run = run
		if err := safeCall(h.Fn, t); err != nil {
			return fail(h.Owner, true, err)
		}
	}
	r.running = nil
	r.btx = nil
	var start time.Time
	if r.db.onCommit != nil {
		start = time.Now()
	}
	if err := btx.Commit(); err != nil {
		return -1, false, r.db.commitFailed(err)
	}
	if r.db.onCommit != nil {
		r.db.onCommit(time.Since(start))
	}
	r.db.committed(before, probe)
	return -1, false, nil
}

// abortGoexit cleans up after a function called runtime.Goexit: it rolls
// the transaction back and gives that call errGoexit. The other calls stay
// in r.todo and are run again.
func (r *batchRun) abortGoexit() {
	if r.btx != nil {
		_ = r.btx.Rollback()
		r.btx = nil
	}
	culprit := r.running
	r.running = nil
	if culprit == nil {
		// Only a function can call Goexit; never loop on anything else.
		for _, c := range r.todo {
			c.err, c.done = errGoexit, true
		}
		r.todo = nil
		return
	}
	culprit.err, culprit.done = errGoexit, true
	r.todo = slices.DeleteFunc(r.todo, func(c *call) bool { return c == culprit })
}
