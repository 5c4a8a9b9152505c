package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/authsrv/authsrv/store"
)

// compactTxSize is how many bytes of keys and values Compact copies per
// transaction of the new file, which bounds its memory.
const compactTxSize = 64 << 20

// CompactResult is what Compact did: the file's size before and after.
type CompactResult struct {
	Before, After int64
}

// CompactOptions tunes Compact. The zero value is ready to use.
type CompactOptions struct {
	// Timeout is how long Compact waits for the file lock; a server that
	// holds it makes Compact fail with an error wrapping store.ErrLocked.
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// Verify, when set, checks the compacted copy (opened as a store)
	// before it replaces the original; an error keeps the original.
	Verify func(context.Context, store.Store) error
}

// Compact rewrites the store file at path without its free pages. It holds
// the file's lock throughout, so it refuses a file a server has open and no
// server can open it meanwhile. The copy is written to a temporary file in
// the same directory (mode 0600), synced, checked (bbolt's consistency
// check, the same buckets with the same number of keys and sequences, and
// opts.Verify), then renamed over path and the directory synced. On any
// error path is left as it was and the temporary file is removed.
//
// A server started while Compact runs waits for the lock (and gives up after
// its own timeout); one that got past its wait just as Compact renamed
// would hold the old, replaced file, so run Compact with the server stopped.
func Compact(ctx context.Context, path string, opts CompactOptions) (res CompactResult, err error) {
	if opts.Timeout < 0 {
		return res, fmt.Errorf("compact %s: negative lock timeout %v", path, opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	fi, err := os.Stat(path)
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return res, fmt.Errorf("compact %s: not a regular file", path)
	}
	// Opened for writing, so that the lock is exclusive: a server cannot
	// start on the file while it is copied and replaced.
	src, err := bbolt.Open(path, DefaultFileMode, &bbolt.Options{Timeout: opts.Timeout, FreelistType: bbolt.FreelistMapType})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return res, &lockedError{path: path}
	case err != nil:
		return res, fmt.Errorf("compact: open %s: %w", path, err)
	}
	defer func() {
		if cerr := src.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("compact: close %s: %w", path, cerr)
		}
	}()
	// The size under the lock: a server may have written since the Stat.
	if fi, err = os.Stat(path); err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	res.Before = fi.Size()

	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".compact-*")
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	tmpPath := tmp.Name()
	renamed := false
	defer func() {
		if !renamed {
			_ = os.Remove(tmpPath)
		}
	}()
	err = tmp.Chmod(DefaultFileMode)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	if err := copyCompact(tmpPath, src); err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	if err := checkCopy(ctx, tmpPath, src, opts.Verify); err != nil {
		return res, fmt.Errorf("compact: the compacted copy: %w", err)
	}
	if fi, err = os.Stat(tmpPath); err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	res.After = fi.Size()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return res, fmt.Errorf("compact: sync %s (the compacted file is in place): %w", dir, err)
	}
	return res, nil
}

// copyCompact writes src's contents into the empty file at dst, cuts the
// file to the pages in use and syncs it.
func copyCompact(dst string, src *bbolt.DB) error {
	// Unsynced commits while copying; one sync of the file at the end
	// makes it durable before the rename.
	db, err := bbolt.Open(dst, DefaultFileMode, &bbolt.Options{NoSync: true, FreelistType: bbolt.FreelistMapType, Timeout: DefaultTimeout})
	if err != nil {
		return err
	}
	var used int64
	err = bbolt.Compact(db, src, compactTxSize)
	if err == nil {
		// The pages in use end here; the file past it is bbolt's
		// preallocation for growth (up to 16 MiB at a time).
		err = db.View(func(tx *bbolt.Tx) error { used = tx.Size(); return nil })
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if fi, serr := f.Stat(); serr != nil {
		err = serr
	} else if used > 0 && fi.Size() > used {
		err = f.Truncate(used)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkCopy opens the copy at path and checks it against src.
func checkCopy(ctx context.Context, path string, src *bbolt.DB, verify func(context.Context, store.Store) error) error {
	want, err := shape(src)
	if err != nil {
		return fmt.Errorf("reading the original: %w", err)
	}
	db, err := open(path, Options{}, true)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	err = db.bdb.View(func(tx *bbolt.Tx) error {
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("consistency check: %w", err)
	}
	got, err := shape(db.bdb)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d buckets, the original has %d", len(got), len(want))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			return fmt.Errorf("bucket %q: %d keys, %d sub-buckets, sequence %d; the original: %d, %d, %d",
				name, g.keys, g.buckets, g.seq, w.keys, w.buckets, w.seq)
		}
	}
	if verify != nil {
		return verify(ctx, db)
	}
	return nil
}

// bucketShape is what checkCopy compares of a top-level bucket.
type bucketShape struct {
	keys, buckets int
	seq           uint64
}

func shape(db *bbolt.DB) (map[string]bucketShape, error) {
	out := map[string]bucketShape{}
	err := db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			st := b.Stats()
			out[string(name)] = bucketShape{keys: st.KeyN, buckets: st.BucketN, seq: b.Sequence()}
			return nil
		})
	})
	return out, err
}
