package store_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
)

func TestWriteErrorClassifies(t *testing.T) {
	for _, tc := range []struct {
		err     error
		reason  string
		noSpace bool
	}{
		{&fs.PathError{Op: "write", Path: "/d/authsrv.db", Err: syscall.ENOSPC}, "no space left on device", true},
		{fmt.Errorf("commit: %w", syscall.EDQUOT), "disk quota exceeded", true},
		// bbolt formats a failed resize's cause into its text.
		{errors.New("file resize error: truncate /d/authsrv.db: file too large"), "file too large", true},
		{&fs.PathError{Op: "sync", Path: "/d/authsrv.db", Err: syscall.EIO}, "input/output error", false},
		{&fs.PathError{Op: "write", Path: "/d/authsrv.db", Err: syscall.EROFS}, "read-only file system", false},
		{errors.New("mmap allocate error: cannot allocate memory"), "mmap allocate error: cannot allocate memory", false},
	} {
		we := &store.WriteError{Err: tc.err}
		if got := we.Reason(); got != tc.reason {
			t.Errorf("%v: Reason = %q, want %q", tc.err, got, tc.reason)
		}
		if we.NoSpace() != tc.noSpace {
			t.Errorf("%v: NoSpace = %v, want %v", tc.err, we.NoSpace(), tc.noSpace)
		}
		var err error = we
		if !errors.Is(err, store.ErrWriteFailed) || !errors.Is(err, tc.err) {
			t.Errorf("%v: the WriteError does not wrap the sentinel and its cause", tc.err)
		}
	}
}

func TestWriteHealthTransitions(t *testing.T) {
	var h store.WriteHealth
	var seen []store.WriteState
	h.Watch(func(s store.WriteState) { seen = append(seen, s) })
	if h.Succeeded(true) || len(seen) != 0 || h.State().Failing {
		t.Fatal("a success without a failure changed the state")
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := &store.WriteError{Err: syscall.ENOSPC}
	if we, began := h.Failed(first, t0); !began || we != first {
		t.Fatalf("first failure: %v %v", we, began)
	}
	for range 3 {
		if we, began := h.Failed(syscall.EIO, t0.Add(time.Second)); began || !errors.Is(we, syscall.EIO) {
			t.Fatalf("later failure: %v %v", we, began)
		}
	}
	st := h.State()
	if !st.Failing || st.Err != first || !st.Since.Equal(t0) || st.Failed != 4 || st.Total != 4 {
		t.Fatalf("state: %+v", st)
	}
	if st.Reason() != "store writes failing: no space left on device" {
		t.Errorf("Reason = %q", st.Reason())
	}
	if h.Succeeded(false) || !h.State().Failing {
		t.Error("a commit that needed no new space ended the failure")
	}
	if !h.Succeeded(true) || h.State().Failing || h.State().Reason() != "" {
		t.Errorf("a commit that needed new space did not end the failure: %+v", h.State())
	}
	if h.Succeeded(true) {
		t.Error("a second success reported a recovery")
	}
	if len(seen) != 2 || !seen[0].Failing || seen[0].Failed != 1 || seen[1].Failing || seen[1].Failed != 4 {
		t.Errorf("watcher saw %+v, want one failure and one recovery", seen)
	}
	h.Failed(syscall.ENOSPC, t0.Add(time.Hour))
	if st := h.State(); st.Failed != 1 || st.Total != 5 || len(seen) != 3 {
		t.Errorf("a new failure: %+v, %d changes", st, len(seen))
	}
}

func TestWritesOfAStoreWithoutHealth(t *testing.T) {
	var s store.Store
	if st := store.Writes(s); st.Failing {
		t.Error("a store without a write state reports failing")
	}
	if store.WatchWrites(s, func(store.WriteState) {}) {
		t.Error("WatchWrites accepted a store without a write state")
	}
}
