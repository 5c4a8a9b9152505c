package bolt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// fillAndThin writes n keys of 1 KiB to bucket "log" and one key to
// "keep", then deletes all but every fourth "log" key.
func fillAndThin(t *testing.T, path string, n int) {
	t.Helper()
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	ctx := t.Context()
	val := bytes.Repeat([]byte("x"), 1024)
	for start := 0; start < n; start += 500 {
		err := db.Update(ctx, func(tx store.Tx) error {
			b := tx.Bucket("log")
			for i := start; i < min(start+500, n); i++ {
				if _, err := b.NextSequence(); err != nil {
					return err
				}
				if err := b.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = db.Update(ctx, func(tx store.Tx) error {
		if err := tx.Bucket("keep").Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		b := tx.Bucket("log")
		for i := range n {
			if i%4 != 0 {
				if err := b.Delete(binary.BigEndian.AppendUint64(nil, uint64(i))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// leftovers lists the files in dir other than the store.
func leftovers(t *testing.T, dir string, keep ...string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != "authsrv.db" && !slices.Contains(keep, e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestCompactShrinksAndKeepsData(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "authsrv.db")
	const n = 8000
	fillAndThin(t, path, n)
	before := size(t, path)
	verified := false
	res, err := bolt.Compact(t.Context(), path, bolt.CompactOptions{Verify: func(ctx context.Context, s store.Store) error {
		verified = true
		return s.View(ctx, func(tx store.Tx) error {
			if got := tx.Bucket("keep").Get([]byte("k")); string(got) != "v" {
				return fmt.Errorf("keep/k = %q in the copy", got)
			}
			return nil
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !verified {
		t.Error("Verify was not called")
	}
	after := size(t, path)
	if res.Before != before || res.After != after {
		t.Errorf("result %+v, file sizes %d before and %d after", res, before, after)
	}
	if after*2 > before {
		t.Errorf("compacted %d → %d bytes: want at most half, 3/4 of the values were deleted", before, after)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after compaction %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("files left in the directory: %v", l)
	}
	db := openSynced(t, path, bolt.Options{})
	err = db.View(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket("log")
		if seq := b.Sequence(); seq != n {
			t.Errorf("log sequence %d after compaction, want %d", seq, n)
		}
		count := 0
		err := b.ForEach(nil, func(k, v []byte) error {
			if i := binary.BigEndian.Uint64(k); i%4 != 0 || len(v) != 1024 {
				t.Errorf("key %d with %d bytes after compaction", i, len(v))
			}
			count++
			return nil
		})
		if count != n/4 {
			t.Errorf("%d keys after compaction, want %d", count, n/4)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The compacted store takes writes.
	if err := db.Update(t.Context(), func(tx store.Tx) error { return tx.Bucket("log").Put([]byte("new"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
}

func TestCompactRefusesAHeldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "authsrv.db")
	fillAndThin(t, path, 100)
	held := openSynced(t, path, bolt.Options{})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bolt.Compact(t.Context(), path, bolt.CompactOptions{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "is another authsrv running") {
		t.Fatalf("Compact of a held file = %v, want ErrLocked", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
		t.Error("the held file changed")
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("files left in the directory: %v", l)
	}
	_ = held.Close()
}

func TestCompactErrorsKeepTheOriginal(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range []struct {
		name   string
		file   string
		ctx    context.Context
		setup  func(t *testing.T, dir string)
		verify func(context.Context, store.Store) error
		want   string
	}{
		{"verify fails", "authsrv.db", nil, nil, func(context.Context, store.Store) error { return errors.New("chain broken") }, "chain broken"},
		{"cancelled", "authsrv.db", cancelled, nil, nil, "context canceled"},
		// The temporary file's name is longer than a file name may be.
		{"temporary file refused", strings.Repeat("a", 240) + ".db", nil, nil, nil, "file name too long"},
		{"read-only directory", "authsrv.db", nil, func(t *testing.T, dir string) {
			if runtime.GOOS == "windows" || os.Geteuid() == 0 {
				t.Skip("directory permissions do not bind for root or on Windows; the temporary file refused case covers the path")
			}
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		}, nil, "permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, c.file)
			fillAndThin(t, path, 400)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if c.setup != nil {
				c.setup(t, dir)
			}
			ctx := c.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			_, err = bolt.Compact(ctx, path, bolt.CompactOptions{Verify: c.verify})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Compact = %v, want an error with %q", err, c.want)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
				t.Error("the original file changed")
			}
			if l := leftovers(t, dir, c.file); len(l) != 0 {
				t.Errorf("files left in the directory: %v", l)
			}
		})
	}
	if _, err := bolt.Compact(t.Context(), filepath.Join(t.TempDir(), "missing.db"), bolt.CompactOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Compact of a missing file = %v, want ErrNotExist", err)
	}
}
