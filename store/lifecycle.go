package store

import (
	"context"
	"sync"
	"time"
)

// Lifecycle is the part of a backend that Close shares with every call:
// calls enter it and leave it, background goroutines run under it, and
// Close waits for both before it releases the backend. Backends hold it
// in an unexported field, so that its methods stay off their API. The zero
// value is ready to use.
type Lifecycle struct {
	mu      sync.Mutex
	closed  bool
	closing chan struct{} // made on first use; closed by Close
	probing bool          // a probe goroutine runs

	inflight sync.WaitGroup // calls between Enter and Done
	bg       sync.WaitGroup // goroutines started by Go and StartProbe
	once     sync.Once
	err      error
}

// closingLocked returns the closing channel, making it first; l.mu is held.
func (l *Lifecycle) closingLocked() chan struct{} {
	if l.closing == nil {
		l.closing = make(chan struct{})
	}
	return l.closing
}

// Enter registers a call that Close must wait for. It reports false after
// Close began; otherwise the caller must call Done when it returns.
func (l *Lifecycle) Enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.inflight.Add(1)
	return true
}

// Begin starts a call of a backend method: ctx's error when it is done,
// ErrClosed after Close began, else nil, and the caller must call Done
// when it returns.
func (l *Lifecycle) Begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !l.Enter() {
		return ErrClosed
	}
	return nil
}

// Done ends a call that Enter registered.
func (l *Lifecycle) Done() { l.inflight.Done() }

// Closing is closed when Close begins: background goroutines stop on it.
func (l *Lifecycle) Closing() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closingLocked()
}

// Close refuses new calls, closes Closing, waits for the calls that
// entered and for the background goroutines, and then calls release once.
// It returns release's result, on this and every later call.
func (l *Lifecycle) Close(release func() error) error {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.closingLocked())
		l.mu.Unlock()
		l.inflight.Wait()
		l.bg.Wait()
		l.err = release()
	})
	return l.err
}

// Go runs fn on a goroutine that Close waits for; fn must return soon
// after closing is closed. It does nothing after Close began.
func (l *Lifecycle) Go(fn func(closing <-chan struct{})) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	closing := l.closingLocked()
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		fn(closing)
	}()
}

// StartProbe starts the write probe unless it runs or Close began. A
// backend calls it when a commit begins a write failure (after recording
// it, so that failing reports it). Every interval, while failing reports
// true, the probe goroutine calls probe, with a context that is cancelled
// when Close begins; it ends when failing reports false or at Close.
// failing is checked under the same lock as StartProbe's, so a failure
// that begins after the goroutine's last look starts a new one.
func (l *Lifecycle) StartProbe(interval time.Duration, failing func() bool, probe func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.probing || l.closed {
		return
	}
	l.probing = true
	closing := l.closingLocked()
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		l.probeLoop(closing, interval, failing, probe)
	}()
}

// probeLoop is the probe goroutine of StartProbe.
func (l *Lifecycle) probeLoop(closing <-chan struct{}, interval time.Duration, failing func() bool, probe func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-closing:
			l.mu.Lock()
			l.probing = false
			l.mu.Unlock()
			return
		case <-tick.C:
		}
		l.mu.Lock()
		if !failing() {
			l.probing = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		probe(ctx)
	}
}

// PreCommits is the store.PreCommitter state of one run of a write
// transaction, for backends: the values kept and the hooks registered,
// each with its owner (the function that registered it, as the backend
// identifies it). A run that rolls back drops it with the transaction.
type PreCommits[O any] struct {
	vals map[any]any
	// Hooks are the registered hooks, in order.
	Hooks []PreCommitHook[O]
	// Owner is the owner of the hooks registered now: the backend sets it
	// before it runs each function.
	Owner O
	// Hooking is set by the backend while the hooks run: PreCommit then
	// keeps nothing.
	Hooking bool
}

// PreCommitHook is a hook and the owner that registered it: the hook's
// error is its owner's.
type PreCommitHook[O any] struct {
	Fn    func(Tx) error
	Owner O
}

// PreCommit implements PreCommitter.PreCommit for a transaction whose run
// state is r. A nil r is a read transaction: nothing commits, so it
// returns start's value and keeps nothing, as it does from a hook.
func (r *PreCommits[O]) PreCommit(key any, start func() (any, func(Tx) error)) any {
	if r == nil {
		v, _ := start()
		return v
	}
	if v, ok := r.vals[key]; ok {
		return v
	}
	v, hook := start()
	if r.Hooking {
		return v
	}
	if r.vals == nil {
		r.vals = map[any]any{}
	}
	r.vals[key] = v
	if hook != nil {
		r.Hooks = append(r.Hooks, PreCommitHook[O]{Fn: hook, Owner: r.Owner})
	}
	return v
}
