package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/authsrv/authsrv/store"
)

// Group commit. Update calls queue; one of them at a time leads: it takes
// the oldest queued calls (itself first, at most MaxBatch) and runs their
// functions one after the other in one SERIALIZABLE transaction, then the
// PreCommit hooks once, then commits. The calls that queued meanwhile
// form the next batch, led by the oldest of them. Each function of a
// batch of several runs inside a savepoint, so that a function that fails
// (an error, a panic, a failed statement) is rolled back alone, gets its
// error, and the others commit. A function that used PreCommit changed
// state the whole batch shares (the audit chain's tip), which a savepoint
// does not restore: its failure rolls the whole transaction back, and the
// others run again without it, as store/bolt does. A serialization
// failure runs the whole batch again (Update may run its function more
// than once). Results are given out only when the batch has committed,
// or has failed for good.
//
// Because every writer of a node goes through one transaction at a time,
// the writers of a hot row on one node (the audit chain's head, which
// every request updates) no longer fail each other: they share a commit.
// Between nodes, each batch first takes the schema's writer lock
// (see savepoints), so the nodes' batches take turns too. SERIALIZABLE stays
// as the guard for any writer that does not lock; a batch that loses a
// conflict runs again after a short random wait.

// errGoexit is the result of an Update whose function called
// runtime.Goexit (t.FailNow does); Update then calls runtime.Goexit on its
// caller's goroutine.
var errGoexit = errors.New("store/postgres: Update function called runtime.Goexit")

// call is one queued Update.
type call struct {
	ctx context.Context
	fn  func(store.Tx) error
	err error
	// done is set, with err final, before wake.
	done bool
	// leader is set, under Store.qmu, when the call is chosen to lead the
	// next batch.
	leader bool
	// back is set when its batch put the call back in the queue (the
	// batch ran out of time before its turn).
	back bool
	// wake receives once: either the result is ready (done) or the caller
	// has been made the leader.
	wake chan struct{}

	// The outcome of the function in the current attempt of its batch,
	// which becomes the result when the batch commits: ran is set when it
	// ran and was kept apart (committed, or rolled back to its
	// savepoint); res is its error, and op the failed step when res is a
	// statement's error ("" when res is the function's own).
	ran bool
	res error
	op  string
}

// finish gives c its result.
func (c *call) finish(err error) { c.err, c.done = err, true }

// update queues fn and returns its result: it waits while another call
// leads, and leads a batch itself when its turn comes.
func (s *Store) update(ctx context.Context, fn func(store.Tx) error) error {
	c := &call{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	s.qmu.Lock()
	s.pending = append(s.pending, c)
	lead := !s.leading
	s.leading, c.leader = true, lead
	s.qmu.Unlock()
	if !lead {
		select {
		case <-c.wake:
		case <-ctx.Done():
			s.qmu.Lock()
			if i := slices.Index(s.pending, c); i >= 0 && !c.leader {
				// Still queued and nobody's turn: leave without a trace.
				s.pending = slices.Delete(s.pending, i, i+1)
				s.qmu.Unlock()
				return ctx.Err()
			}
			s.qmu.Unlock()
			<-c.wake // in a batch now, or the next leader
		}
	}
	if !c.done {
		s.lead(c)
	}
	if c.err == errGoexit {
		runtime.Goexit() // fn did this; finish the job on the caller's goroutine
	}
	return c.err
}

// lead takes the oldest queued calls (self first) as one batch, runs them,
// passes leadership to the next queued call if there is one, and then
// wakes the batch's callers. Each leader runs one batch, so nobody keeps
// serving other callers for long.
func (s *Store) lead(self *call) {
	if h := s.beforeBatch; h != nil {
		h()
	}
	s.qmu.Lock()
	n := min(len(s.pending), s.opts.MaxBatch)
	batch := s.pending[:n:n]
	if n == len(s.pending) {
		s.pending = nil
	} else {
		s.pending = slices.Clone(s.pending[n:])
	}
	s.qmu.Unlock()
	for _, c := range batch {
		c.back = false
	}

	r := &batchRun{s: s, todo: slices.Clone(batch)}
	finished := false
	defer func() {
		if !finished {
			// self's function, run below on this goroutine, called
			// runtime.Goexit: the goroutine ends as asked, but the
			// transaction and the leadership must not go with it.
			r.abortGoexit()
		}
		s.handOff(self, batch)
	}()
	if len(batch) == 1 {
		r.runCalls(r.todo) // alone: on the caller's own goroutine
	} else {
		for !r.runGuarded() {
			r.abortGoexit()
		}
	}
	finished = true
}

// handOff makes the oldest queued call the next leader, or records that
// none leads, and then wakes the callers of the finished batch (not those
// it put back in the queue).
func (s *Store) handOff(self *call, batch []*call) {
	// The calls to wake are chosen first: once the next leader runs, it
	// may finish a call this batch put back.
	var wake []*call
	for _, c := range batch {
		if c != self && c.done {
			wake = append(wake, c)
		}
	}
	s.qmu.Lock()
	if len(s.pending) > 0 {
		s.pending[0].leader = true
		s.pending[0].wake <- struct{}{} // buffered; never blocks
	} else {
		s.leading = false
	}
	s.qmu.Unlock()
	for _, c := range wake {
		c.wake <- struct{}{}
	}
}

// batchRun is the state of one batch while it runs.
type batchRun struct {
	s       *Store
	todo    []*call // the batch's calls, in queue order
	ptx     pgx.Tx  // the open transaction, if any
	running *call   // the call whose function or hook runs, if any
}

// runGuarded runs a batch of several calls on a goroutine of its own, so
// that a function calling runtime.Goexit ends only that goroutine and not
// another caller's. It reports whether the batch finished.
func (r *batchRun) runGuarded() bool {
	finished := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { finished <- ok }()
		r.runCalls(r.todo)
		ok = true
	}()
	return <-finished
}

// abortGoexit cleans up after a function called runtime.Goexit: it rolls
// the transaction back and gives that call errGoexit. The other calls are
// run again.
func (r *batchRun) abortGoexit() {
	if r.ptx != nil {
		r.s.rollback(context.Background(), r.ptx)
		r.ptx = nil
	}
	culprit := r.running
	r.running = nil
	if culprit == nil {
		// Only a function or a hook can call Goexit; never loop on
		// anything else.
		for _, c := range r.todo {
			if !c.done && !c.back {
				c.finish(errGoexit)
			}
		}
		return
	}
	culprit.finish(errGoexit)
}

// outcome is how one attempt of a batch ended.
type outcome struct {
	// op is the failed step, with err and retry; "" when the batch
	// committed or a function failed (culprit).
	op    string
	err   error
	retry retryKind
	// culprit is the call whose function (or hook) failed after using
	// PreCommit, or that ran alone and failed: the transaction was rolled
	// back. final says the failure is the call's result (it saw no other
	// function's writes); otherwise it runs again alone. res and resOp
	// are its error, as in call.
	culprit *call
	final   bool
	res     error
	resOp   string
}

// runCalls runs calls (those neither done nor put back) until each has a
// result: it retries the attempts that lost a serialization conflict or a
// connection, and takes out the functions that failed.
func (r *batchRun) runCalls(calls []*call) {
	s := r.s
	calls = slices.Clone(calls)
	var connErr error // the first lost connection's error
	for conflicts := 0; ; {
		calls = slices.DeleteFunc(calls, func(c *call) bool { return c.done || c.back })
		if len(calls) == 0 {
			return
		}
		o := r.attempt(calls)
		switch {
		case o.culprit != nil:
			if o.final {
				o.culprit.finish(s.result(o.culprit.ctx, o.resOp, o.res))
			} else {
				// It saw the writes of the functions before it (or its
				// hook, run after all of them, did): only a run on its
				// own is authoritative.
				r.runCalls([]*call{o.culprit})
			}
			continue
		case o.op == "":
			continue // committed: every call that ran is done
		}
		err := o.err
		if connErr != nil {
			err = fmt.Errorf("%w (after a lost connection: %w)", err, connErr)
		}
		switch o.retry {
		case retryNo:
			r.failAll(calls, o.op, err)
			return
		case retryConn:
			s.pool.Reset()
			if connErr != nil {
				r.failAll(calls, o.op, err)
				return
			}
			connErr = o.err
		case retryConflict:
			conflicts++
			if conflicts >= s.opts.MaxAttempts {
				r.failAll(calls, fmt.Sprintf("%s: gave up after %d attempts", o.op, conflicts), err)
				return
			}
			// Another node won: wait a little, longer after every loss,
			// so that the nodes' batches stop meeting.
			wait := time.Duration(rand.Int64N(int64(min(retryCap, retryBase<<min(conflicts, 16)))))
			timer := time.NewTimer(wait)
			if len(calls) == 1 {
				select {
				case <-calls[0].ctx.Done():
				case <-timer.C:
				}
			} else {
				<-timer.C
			}
			timer.Stop()
		}
	}
}

// failAll ends calls after a failure of the whole transaction: a call
// whose function failed on its own in the failed attempt keeps its own
// error (nothing of it would have been kept anyway); the others get the
// failure's.
func (r *batchRun) failAll(calls []*call, op string, err error) {
	for _, c := range calls {
		switch {
		case c.done || c.back:
		case c.ran && c.res != nil:
			c.finish(r.s.result(c.ctx, c.op, c.res))
		default:
			c.finish(r.s.fail(c.ctx, op, err))
		}
	}
}

// result is the error of a call whose function failed: its own error as
// is, or a failed statement's error built by fail.
func (s *Store) result(ctx context.Context, op string, err error) error {
	if op == "" || err == nil {
		return err
	}
	return s.fail(ctx, op, err)
}

// attempt runs calls in one transaction, each function in a savepoint of
// its own when there are several, then the PreCommit hooks, and commits.
// Calls whose ctx has ended get its error without running; when the batch
// has run for MaxBatchTime, the calls not started yet go back to the
// queue.
func (r *batchRun) attempt(calls []*call) outcome {
	s := r.s
	multi := len(calls) > 1
	ctx := calls[0].ctx
	if multi {
		// The transaction is the batch's: no caller's end may cut it
		// short. Each statement stays bounded by QueryTimeout.
		ctx = context.WithoutCancel(ctx)
	}
	for _, c := range calls {
		c.ran, c.res, c.op = false, nil, ""
	}
	ptx, err := s.begin(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return outcome{op: "update: begin", err: err, retry: classify(err, false)}
	}
	r.ptx = ptx
	committed := false
	defer func() {
		if !committed {
			s.rollback(ctx, ptx)
		}
		r.ptx = nil
	}()
	run := &store.PreCommits[*call]{}
	sp := &savepoints{ptx: ptx, lock: s.q.lockWriters}
	start := time.Now()
	var ran []*call
	mods := 0
	for i, c := range calls {
		if i > 0 && time.Since(start) >= s.opts.MaxBatchTime {
			s.putBack(calls[i:])
			break
		}
		if err := c.ctx.Err(); err != nil {
			c.finish(err)
			continue
		}
		fc := &fnConn{sp: sp, use: multi}
		t := &tx{s: s, ctx: ctx, ptx: fc, writable: true, run: run}
		run.Owner = c
		r.running = c
		ferr := safeCall(c.fn, t)
		r.running = nil
		var op string
		if t.err != nil {
			ferr, op = t.err, "update"
			if k := classify(t.err, false); k != retryNo || (multi && !fc.set) {
				// The transaction's fault (a conflict, a lost
				// connection), or a failure no savepoint can undo.
				return outcome{op: op, err: t.err, retry: k}
			}
		}
		switch {
		case ferr == nil:
			ran = append(ran, c)
			c.ran = true
			mods += t.mods
			continue
		case !multi || t.shared:
			return outcome{culprit: c, final: len(ran) == 0, res: ferr, resOp: op}
		}
		if fc.set {
			if err := sp.rollback(ctx, s.opts.QueryTimeout); err != nil {
				return outcome{op: "update: rollback to savepoint", err: err, retry: classify(err, false)}
			}
		}
		ran = append(ran, c)
		c.ran, c.res, c.op = true, ferr, op
	}
	if len(ran) == 0 {
		return outcome{} // nothing ran: nothing to commit
	}
	run.Hooking = true
	for _, h := range run.Hooks {
		t := &tx{s: s, ctx: ctx, ptx: &fnConn{sp: sp}, writable: true, run: run}
		r.running = h.Owner
		herr := safeCall(h.Fn, t)
		r.running = nil
		if t.err != nil {
			return outcome{op: "update: pre-commit hook", err: t.err, retry: classify(t.err, false)}
		}
		if herr != nil {
			return outcome{culprit: h.Owner, final: len(ran) == 1, res: herr}
		}
		mods += t.mods
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	committed = true
	if err := ptx.Commit(cctx); err != nil {
		if _, ok := errors.AsType[*pgconn.PgError](err); !ok && ctx.Err() == nil {
			err = fmt.Errorf("outcome unknown, the connection failed during the commit: %w", err)
		}
		return outcome{op: "update: commit", err: err, retry: classify(err, true)}
	}
	if mods > 0 && s.health.State().Failing {
		s.health.Succeeded(true)
	}
	if s.onCommit != nil {
		s.onCommit(len(ran))
	}
	for _, c := range ran {
		c.finish(s.result(c.ctx, c.op, c.res))
	}
	return outcome{}
}

// putBack returns calls that a batch did not start to the front of the
// queue, for the next batch.
func (s *Store) putBack(calls []*call) {
	var back []*call
	for _, c := range calls {
		if !c.done {
			c.back = true
			back = append(back, c)
		}
	}
	s.qmu.Lock()
	s.pending = append(back, s.pending...)
	s.qmu.Unlock()
}

// savepoints is the state of a batch's transaction: the writer lock, and
// the savepoint, named f, of which one is open at a time.
//
// The transaction's first statement is preceded by lock, the LOCK of the
// schema's writer table, in the same round trip. The writers of all
// nodes then run one after the other, each on a snapshot taken once the
// previous one has committed: nodes wait for each other instead of
// failing each other on the rows every request writes (the audit chain's
// head and sequence). A LOCK statement does not fix the snapshot of a
// SERIALIZABLE transaction (its first query does); a SELECT of an
// advisory lock would, before the wait. The lock ends with the
// transaction.
type savepoints struct {
	ptx    pgx.Tx
	lock   string
	locked bool // lock went through
	open   bool // a savepoint f exists
}

// rollback rolls the transaction back to the savepoint, which stays open.
func (sp *savepoints) rollback(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := sp.ptx.Exec(ctx, `ROLLBACK TO SAVEPOINT f`)
	return err
}

// fnConn is the transaction as one function (or hook) of a batch sees
// it: its first statement is preceded by the writer lock when nothing
// took it yet and, with use set, by a new savepoint (after the release of
// the previous function's), sent in the same round trip, so that the
// function can be rolled back alone.
type fnConn struct {
	sp  *savepoints
	use bool
	set bool // this function's savepoint is open
}

// prefix returns the statements to send before the next one.
func (f *fnConn) prefix() []string {
	var p []string
	if !f.sp.locked {
		p = append(p, f.sp.lock)
	}
	switch {
	case !f.use || f.set:
	case f.sp.open:
		p = append(p, `RELEASE SAVEPOINT f`, `SAVEPOINT f`)
	default:
		p = append(p, `SAVEPOINT f`)
	}
	return p
}

// sent records that the prefix went through: the lock is held and the
// savepoint is open.
func (f *fnConn) sent() {
	f.sp.locked = true
	if f.use {
		f.sp.open, f.set = true, true
	}
}

func (f *fnConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p := f.prefix()
	if p == nil {
		return f.sp.ptx.Exec(ctx, sql, args...)
	}
	br, err := sendPrefixed(ctx, f.sp.ptx, p, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	f.sent()
	return execLast(br)
}

func (f *fnConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p := f.prefix()
	if p == nil {
		return f.sp.ptx.Query(ctx, sql, args...)
	}
	br, err := sendPrefixed(ctx, f.sp.ptx, p, sql, args)
	if err != nil {
		return nil, err
	}
	f.sent()
	return queryLast(br)
}

func (f *fnConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	p := f.prefix()
	if p == nil {
		return f.sp.ptx.QueryRow(ctx, sql, args...)
	}
	br, err := sendPrefixed(ctx, f.sp.ptx, p, sql, args)
	if err != nil {
		return errRow{err}
	}
	f.sent()
	return &batchRow{row: br.QueryRow(), br: br}
}

// batcher sends a pipeline of statements: a pgx.Tx or a pooled
// connection.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// sendPrefixed sends the statements of prefix (without arguments) and then
// sql, in one round trip, and reads the results of prefix. The caller
// reads sql's result from the returned batch, which it must close (the
// helpers below do). On error the batch is closed.
func sendPrefixed(ctx context.Context, q batcher, prefix []string, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	for _, p := range prefix {
		b.Queue(p)
	}
	b.Queue(sql, args...)
	br := q.SendBatch(ctx, b)
	for _, p := range prefix {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("%s: %w", strings.ToLower(p), err)
		}
	}
	return br, nil
}

// execLast reads the result of a batch's last statement and closes it.
func execLast(br pgx.BatchResults) (pgconn.CommandTag, error) {
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// queryLast returns the rows of a batch's last statement, which close the
// batch when they close.
func queryLast(br pgx.BatchResults) (pgx.Rows, error) {
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// batchRows are the rows of a batch's last statement.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error // the batch's close error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// batchRow is the row of a batch's last statement; Scan closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errRow is a row whose query was not sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
