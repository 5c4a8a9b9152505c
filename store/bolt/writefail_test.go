package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// fsizeChildEnv makes the test binary run childFileSizeLimit on the file
// it names: a process of its own, because the file size limit holds for
// every file of the process.
const fsizeChildEnv = "AUTHSRV_BOLT_TEST_CHILD_FSIZE"

// TestWriteFailureFileSizeLimit runs a real bbolt file into the process's
// file size limit (RLIMIT_FSIZE; Go ignores SIGXFSZ, so the writes fail
// with EFBIG, as on a full disk they fail with ENOSPC), in a child process:
// see childFileSizeLimit for what it checks.
func TestWriteFailureFileSizeLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authsrv.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fsizeChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	// After the child: the file is consistent and holds every write that
	// was answered nil, and none that was refused.
	db := openSynced(t, path, bolt.Options{})
	if err := bolt.Check(db); err != nil {
		t.Errorf("bbolt check after the write failures: %v", err)
	}
	err = db.View(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket("data")
		for _, k := range []string{"before", "after"} {
			if v := b.Get([]byte(k)); len(v) != bigValue {
				return fmt.Errorf("%s: %d bytes, want %d", k, len(v), bigValue)
			}
		}
		if v := b.Get([]byte("refused")); v != nil {
			return fmt.Errorf("the refused write is in the file (%d bytes)", len(v))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

const bigValue = 1 << 20

// childFileSizeLimit: with the file size limit lowered to the file's
// current data, a write that needs new space is refused with a
// *store.WriteError that wraps store.ErrWriteFailed and EFBIG; the write
// state says failing and the watcher hears of it once, however many writes
// fail; reads work; a small write that fits in the file's free pages does
// not end the failure; once the limit is raised again the probe finds
// writes working without a client write, the watcher hears it once, and a
// big write succeeds. It returns the exit code.
func childFileSizeLimit(path string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		return 1
	}
	ctx := context.Background()
	db, err := bolt.Open(path, bolt.Options{ProbeInterval: 20 * time.Millisecond})
	if err != nil {
		return fail("open: %v", err)
	}
	defer func() { _ = db.Close() }()
	var mu sync.Mutex
	var changes []store.WriteState
	store.WatchWrites(db, func(s store.WriteState) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, s)
	})
	seen := func() []store.WriteState {
		mu.Lock()
		defer mu.Unlock()
		return append([]store.WriteState(nil), changes...)
	}
	put := func(key string, n int) error {
		return db.Update(ctx, func(tx store.Tx) error {
			return tx.Bucket("data").Put([]byte(key), bytes.Repeat([]byte{'x'}, n))
		})
	}
	for i := range 20 {
		if err := put(fmt.Sprintf("small%02d", i), 100); err != nil {
			return fail("small write: %v", err)
		}
	}
	if err := put("before", bigValue); err != nil {
		return fail("write before the limit: %v", err)
	}
	size := bolt.DataSize(db)

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		return fail("getrlimit: %v", err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(size), Max: old.Max}); err != nil {
		return fail("setrlimit: %v", err)
	}
	fmt.Printf("file size limit lowered to %d bytes (the file's data)\n", size)

	for i := range 5 {
		err := put("refused", bigValue)
		if !errors.Is(err, store.ErrWriteFailed) || !errors.Is(err, syscall.EFBIG) {
			return fail("write %d past the limit: %v, want ErrWriteFailed and EFBIG", i, err)
		}
		var we *store.WriteError
		if !errors.As(err, &we) || !we.NoSpace() || we.Reason() != syscall.EFBIG.Error() {
			return fail("write error %v: not a no-space *store.WriteError", err)
		}
	}
	st := store.Writes(db)
	if !st.Failing || st.Failed < 5 || st.Reason() != "store writes failing: file too large" {
		return fail("state after 5 refused writes: %+v (%q)", st, st.Reason())
	}
	if n := len(seen()); n != 1 {
		return fail("the watcher heard of %d changes after 5 refused writes, want 1", n)
	}
	fmt.Printf("refused: %v\n", st.Err)
	// Reads go on.
	err = db.View(ctx, func(tx store.Tx) error {
		if v := tx.Bucket("data").Get([]byte("before")); len(v) != bigValue {
			return fmt.Errorf("before: %d bytes", len(v))
		}
		return nil
	})
	if err != nil {
		return fail("read while writes fail: %v", err)
	}
	// A small write may fit in the file's free pages; whatever it gives,
	// the failure goes on.
	smallErr := db.Update(ctx, func(tx store.Tx) error { return tx.Bucket("data").Delete([]byte("small00")) })
	fmt.Printf("small write while failing: %v\n", smallErr)
	if !store.Writes(db).Failing {
		return fail("a small write ended the failure")
	}

	// Space comes back: the probe finds it.
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		return fail("setrlimit back: %v", err)
	}
	start := time.Now()
	for store.Writes(db).Failing {
		if time.Since(start) > 30*time.Second {
			return fail("writes still failing 30s after the limit was raised")
		}
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Printf("writes work again %v after the limit was raised (probe every 20ms)\n", time.Since(start).Round(time.Millisecond))
	ch := seen()
	if len(ch) != 2 || ch[1].Failing || ch[1].Failed < 5 {
		return fail("watcher: %+v, want a failure then a recovery", ch)
	}
	if err := put("after", bigValue); err != nil {
		return fail("write after the limit was raised: %v", err)
	}
	if st := store.Writes(db); st.Failing || st.Total < 5 {
		return fail("state after recovery: %+v", st)
	}
	return 0
}
