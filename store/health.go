package store

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrWriteFailed is wrapped by the error of a write the storage refused:
// the disk is full, the file too large for its limit, the quota used up,
// the file system read-only or the device failing. Nothing of that write
// was kept. Reads go on working.
var ErrWriteFailed = errors.New("store: writes failing")

// WriteError is the error of a commit the storage refused. It wraps
// ErrWriteFailed and the backend's error, so that errors.Is finds both
// the sentinel and the operating system's error (syscall.ENOSPC, ...).
type WriteError struct {
	// Err is the backend's error.
	Err error
}

func (e *WriteError) Error() string { return "store: cannot write: " + e.Err.Error() }

// Unwrap returns ErrWriteFailed and the backend's error.
func (e *WriteError) Unwrap() []error { return []error{ErrWriteFailed, e.Err} }

// Reason is the operating system's word for the failure ("no space left
// on device"), or the backend's error text when it names none.
func (e *WriteError) Reason() string {
	if errno, ok := writeErrno(e.Err); ok {
		return errno.Error()
	}
	return e.Err.Error()
}

// NoSpace reports whether the failure is a lack of space: a full disk, a
// used-up quota or a file at its size limit.
func (e *WriteError) NoSpace() bool {
	errno, ok := writeErrno(e.Err)
	return ok && (errno == syscall.ENOSPC || errno == syscall.EDQUOT || errno == syscall.EFBIG)
}

// storageErrnos are the operating system errors that say the storage,
// not the caller, refused a write.
var storageErrnos = []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EIO, syscall.EROFS}

// writeErrno finds the storage errno in err: in its chain, or in its text
// (bbolt reports a failed file resize with the cause formatted into the
// text, not wrapped).
func writeErrno(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		for _, e := range storageErrnos {
			if errno == e {
				return e, true
			}
		}
	}
	text := err.Error()
	for _, e := range storageErrnos {
		if strings.HasSuffix(text, e.Error()) {
			return e, true
		}
	}
	return 0, false
}

// WriteState is what a store knows of its writes.
type WriteState struct {
	// Failing is set from a refused commit until a commit that needed new
	// space succeeds again.
	Failing bool
	// Err is the first refused commit's *WriteError of the current
	// failure; nil when writes work.
	Err *WriteError
	// Since is when the current failure began.
	Since time.Time
	// Failed counts the refused commits of the current failure (or of the
	// last one, once writes work again).
	Failed uint64
	// Total counts every refused commit since the store was opened.
	Total uint64
}

// Reason is the failure's text for a status report: "" when writes work.
func (s WriteState) Reason() string {
	if !s.Failing || s.Err == nil {
		return ""
	}
	return "store writes failing: " + s.Err.Reason()
}

// WriteHealth tracks a store's write state for its backend: the backend
// reports every commit with Failed or Succeeded, and the watchers learn of
// each change of state once (the first refused commit, and the return of
// writes), never once per commit. The zero value is ready to use.
type WriteHealth struct {
	mu       sync.Mutex
	state    WriteState
	watchers []func(WriteState)
}

// Failed records a refused commit and returns its error as a *WriteError.
// It reports whether this commit began a failure (the watchers are then
// called, outside the lock).
func (h *WriteHealth) Failed(err error, now time.Time) (*WriteError, bool) {
	we, ok := errors.AsType[*WriteError](err)
	if !ok {
		we = &WriteError{Err: err}
	}
	h.mu.Lock()
	h.state.Total++
	first := !h.state.Failing
	if first {
		h.state = WriteState{Failing: true, Err: we, Since: now, Total: h.state.Total}
	}
	h.state.Failed++
	st, ws := h.state, h.watchers
	h.mu.Unlock()
	if first {
		for _, w := range ws {
			w(st)
		}
	}
	return we, first
}

// Succeeded records a commit that worked. Only a commit that needed new
// space (grew is true) ends a failure: on a full disk a small commit can
// still succeed in space the store already holds, and readiness must not
// flap with it. It reports whether writes work again (the watchers are then
// called).
func (h *WriteHealth) Succeeded(grew bool) bool {
	h.mu.Lock()
	if !h.state.Failing || !grew {
		h.mu.Unlock()
		return false
	}
	h.state.Failing = false
	st, ws := h.state, h.watchers
	h.mu.Unlock()
	for _, w := range ws {
		w(st)
	}
	return true
}

// State returns the current write state.
func (h *WriteHealth) State() WriteState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// Watch adds fn to the functions called on every change of state: once
// when writes begin to fail (Failing set, Err the first error) and once
// when they work again (Failing clear, Failed the number refused). fn must
// not block.
func (h *WriteHealth) Watch(fn func(WriteState)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers = append(h.watchers, fn)
}

// HealthReporter is implemented by stores that track their writes.
type HealthReporter interface {
	// WriteHealth is the store's write state tracker.
	WriteHealth() *WriteHealth
}

// Writes returns s's write state; a store that does not track its writes
// reports them working.
func Writes(s Store) WriteState {
	if h, ok := s.(HealthReporter); ok {
		return h.WriteHealth().State()
	}
	return WriteState{}
}

// WatchWrites calls fn on every change of s's write state (see
// WriteHealth.Watch). It reports false when s does not track its writes.
func WatchWrites(s Store, fn func(WriteState)) bool {
	h, ok := s.(HealthReporter)
	if ok {
		h.WriteHealth().Watch(fn)
	}
	return ok
}
