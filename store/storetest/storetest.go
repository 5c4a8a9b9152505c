// Package storetest is the conformance kit for store.Store: every backend
// passes Run, and other packages' tests get a real store from Open.
//
// It sits just above what it tests: it imports store and store/bolt (for
// Open) and nothing else of authsrv.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// Open returns a real bbolt store in t.TempDir() without fsync, closed when
// the test ends. Tests of other packages use it as their store.
func Open(t testing.TB) store.Store {
	t.Helper()
	return bolt.OpenForTest(t, filepath.Join(t.TempDir(), "store.db"))
}

// Run checks that the stores made by open keep the store.Store contract.
// Each subtest gets a fresh, empty store from open, which should register
// its own cleanup; Run also closes it when the subtest ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"EmptyAndNilValues", testEmptyValues},
		{"PutCopiesValue", testPutCopiesValue},
		{"EmptyKey", testEmptyKey},
		{"MissingBucketReadsEmpty", testMissingBucket},
		{"ReadOnlyTxRefusesWrites", testReadOnly},
		{"ForEach", testForEach},
		{"ForEachWhileWriting", testForEachWhileWriting},
		{"Cursor", testCursor},
		{"Sequence", testSequence},
		{"DeleteBucket", testDeleteBucket},
		{"ErrorRollsBack", testErrorRollsBack},
		{"PanicBecomesError", testPanic},
		{"ConcurrentCounter", testConcurrentCounter},
		{"ConcurrentIndependentKeys", testConcurrentKeys},
		{"ConcurrentFailuresAreIsolated", testConcurrentFailures},
		{"ConfigRevision", testConfigRevision},
		{"JSON", testJSON},
		{"ContextDone", testContextDone},
		{"ViewIsolation", testViewIsolation},
		{"LargeValuesAndManyKeys", testLarge},
		{"Snapshot", testSnapshot},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

func update(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.View(t.Context(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// put writes key=value pairs (alternating strings) into bucket.
func put(t *testing.T, s store.Store, bucket string, kv ...string) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		for i := 0; i+1 < len(kv); i += 2 {
			if err := b.Put([]byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
}

// get reads one key in a View; "<nil>" stands for a missing key.
func get(t *testing.T, s store.Store, bucket, key string) string {
	t.Helper()
	var got string
	view(t, s, func(tx store.Tx) error {
		got = show(tx.Bucket(bucket).Get([]byte(key)))
		return nil
	})
	return got
}

func show(v []byte) string {
	if v == nil {
		return "<nil>"
	}
	return string(v)
}

func testGetPutDelete(t *testing.T, s store.Store) {
	put(t, s, "kv", "a", "1", "b", "2")
	for k, want := range map[string]string{"a": "1", "b": "2", "c": "<nil>"} {
		if got := get(t, s, "kv", k); got != want {
			t.Errorf("Get(%q) = %s, want %s", k, got, want)
		}
	}
	update(t, s, func(tx store.Tx) error {
		b := tx.Bucket("kv")
		if err := b.Put([]byte("a"), []byte("10")); err != nil {
			return err
		}
		if got := show(b.Get([]byte("a"))); got != "10" {
			t.Errorf("Get after Put in the same tx = %s, want 10", got)
		}
		if err := b.Delete([]byte("b")); err != nil {
			return err
		}
		if got := b.Get([]byte("b")); got != nil {
			t.Errorf("Get after Delete in the same tx = %q, want nil", got)
		}
		if err := b.Delete([]byte("missing")); err != nil {
			t.Errorf("Delete(missing key) = %v, want nil", err)
		}
		return nil
	})
	if got := get(t, s, "kv", "a"); got != "10" {
		t.Errorf("Get(a) after overwrite = %s, want 10", got)
	}
	if got := get(t, s, "kv", "b"); got != "<nil>" {
		t.Errorf("Get(b) after Delete = %s, want <nil>", got)
	}
	if got := get(t, s, "other", "a"); got != "<nil>" {
		t.Errorf("buckets are not separate: other/a = %s", got)
	}
}

func testEmptyValues(t *testing.T, s store.Store) {
	check := func(tx store.Tx, when string) {
		b := tx.Bucket("kv")
		for _, k := range []string{"empty", "nil"} {
			if v := b.Get([]byte(k)); v == nil || len(v) != 0 {
				t.Errorf("%s: Get(%q) = %#v, want a non-nil empty value", when, k, v)
			}
		}
		n := 0
		_ = b.ForEach(nil, func(k, v []byte) error {
			if len(v) != 0 {
				t.Errorf("%s: ForEach value of %q = %q, want empty", when, k, v)
			}
			n++
			return nil
		})
		if n != 2 {
			t.Errorf("%s: ForEach visited %d keys, want 2", when, n)
		}
	}
	update(t, s, func(tx store.Tx) error {
		b := tx.Bucket("kv")
		if err := b.Put([]byte("empty"), []byte{}); err != nil {
			return err
		}
		if err := b.Put([]byte("nil"), nil); err != nil {
			return err
		}
		check(tx, "same tx")
		return nil
	})
	view(t, s, func(tx store.Tx) error { check(tx, "after commit"); return nil })
}

func testPutCopiesValue(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		b := tx.Bucket("kv")
		key, val := []byte("key"), []byte("abc")
		if err := b.Put(key, val); err != nil {
			return err
		}
		key[0], val[0] = 'X', 'X'
		if got := show(b.Get([]byte("key"))); got != "abc" {
			t.Errorf("Get in the same tx after the caller reused its buffer = %s, want abc", got)
		}
		return nil
	})
	if got := get(t, s, "kv", "key"); got != "abc" {
		t.Errorf("Get after commit = %s, want abc", got)
	}
	if got := get(t, s, "kv", "Xey"); got != "<nil>" {
		t.Errorf("Put kept the caller's key buffer: Xey = %s", got)
	}
}

func testEmptyKey(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		b := tx.Bucket("kv")
		for _, k := range [][]byte{nil, {}} {
			if err := b.Put(k, []byte("v")); err == nil {
				t.Errorf("Put(%#v) = nil, want an error", k)
			}
			if v := b.Get(k); v != nil {
				t.Errorf("Get(%#v) = %q, want nil", k, v)
			}
			if err := b.Delete(k); err != nil {
				t.Errorf("Delete(%#v) = %v, want nil", k, err)
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		if err := tx.Bucket("kv").ForEach(nil, func(k, _ []byte) error {
			return fmt.Errorf("unexpected key %q", k)
		}); err != nil {
			t.Error(err)
		}
		return nil
	})
}

func testMissingBucket(t *testing.T, s store.Store) {
	check := func(tx store.Tx, kind string) {
		b := tx.Bucket("nope")
		if v := b.Get([]byte("k")); v != nil {
			t.Errorf("%s: Get = %q, want nil", kind, v)
		}
		if err := b.ForEach(nil, func(k, _ []byte) error {
			return fmt.Errorf("visited %q", k)
		}); err != nil {
			t.Errorf("%s: ForEach = %v, want nil", kind, err)
		}
		c := b.Cursor()
		for name, k := range map[string][]byte{
			"First": first(c.First()), "Last": first(c.Last()), "Seek": first(c.Seek([]byte("a"))),
			"Next": first(c.Next()), "Prev": first(c.Prev()),
		} {
			if k != nil {
				t.Errorf("%s: Cursor.%s = %q, want nil", kind, name, k)
			}
		}
		if n := b.Sequence(); n != 0 {
			t.Errorf("%s: Sequence = %d, want 0", kind, n)
		}
	}
	view(t, s, func(tx store.Tx) error { check(tx, "View"); return nil })
	update(t, s, func(tx store.Tx) error {
		check(tx, "Update")
		if err := tx.Bucket("nope").Delete([]byte("k")); err != nil {
			t.Errorf("Delete in a missing bucket = %v, want nil", err)
		}
		if err := tx.DeleteBucket("nope"); err != nil {
			t.Errorf("DeleteBucket(missing) = %v, want nil", err)
		}
		return nil
	})
}

func first(k, _ []byte) []byte { return k }

func testReadOnly(t *testing.T, s store.Store) {
	put(t, s, "kv", "a", "1")
	view(t, s, func(tx store.Tx) error {
		if tx.Writable() {
			t.Error("View tx is writable")
		}
		for _, name := range []string{"kv", "missing"} {
			b := tx.Bucket(name)
			if err := b.Put([]byte("b"), []byte("2")); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("%s: Put = %v, want ErrReadOnly", name, err)
			}
			if err := b.Delete([]byte("a")); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("%s: Delete = %v, want ErrReadOnly", name, err)
			}
			if _, err := b.NextSequence(); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("%s: NextSequence = %v, want ErrReadOnly", name, err)
			}
			if err := tx.DeleteBucket(name); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("DeleteBucket(%s) = %v, want ErrReadOnly", name, err)
			}
		}
		return nil
	})
	if got := get(t, s, "kv", "a"); got != "1" {
		t.Errorf("a = %s after refused writes, want 1", got)
	}
	update(t, s, func(tx store.Tx) error {
		if !tx.Writable() {
			t.Error("Update tx is not writable")
		}
		return nil
	})
}

var forEachKeys = [][]byte{
	[]byte("a"), []byte("ab"), []byte("abc"), []byte("abd"), []byte("b"), []byte("ba"),
	{0x00}, {0x00, 0x00}, {0xfe}, {0xfe, 0xff}, {0xff}, {0xff, 0x00}, {0xff, 0xff}, {0xff, 0xff, 0xff},
}

func testForEach(t *testing.T, s store.Store) {
	// Insert in a scrambled order; iteration must come out sorted.
	keys := slices.Clone(forEachKeys)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	update(t, s, func(tx store.Tx) error {
		for _, k := range keys {
			if err := tx.Bucket("kv").Put(k, append([]byte("v"), k...)); err != nil {
				return err
			}
		}
		return nil
	})
	sorted := slices.Clone(forEachKeys)
	slices.SortFunc(sorted, bytes.Compare)
	withPrefix := func(p []byte) [][]byte {
		var out [][]byte
		for _, k := range sorted {
			if bytes.HasPrefix(k, p) {
				out = append(out, k)
			}
		}
		return out
	}
	walk := func(tx store.Tx, prefix []byte) ([][]byte, error) {
		var got [][]byte
		err := tx.Bucket("kv").ForEach(prefix, func(k, v []byte) error {
			if !bytes.Equal(v, append([]byte("v"), k...)) {
				t.Errorf("value of %x = %x", k, v)
			}
			got = append(got, bytes.Clone(k))
			return nil
		})
		return got, err
	}
	for _, prefix := range [][]byte{
		nil, {}, []byte("a"), []byte("ab"), []byte("abc"), []byte("abcd"), []byte("c"), []byte("zz"),
		{0x00}, {0xfe}, {0xff}, {0xff, 0xff}, {0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(fmt.Sprintf("prefix=%x", prefix), func(t *testing.T) {
			for _, kind := range []string{"View", "Update"} {
				run := s.View
				if kind == "Update" {
					run = s.Update
				}
				if err := run(t.Context(), func(tx store.Tx) error {
					got, err := walk(tx, prefix)
					if err != nil {
						return err
					}
					if want := withPrefix(prefix); !slices.EqualFunc(got, want, bytes.Equal) {
						t.Errorf("%s: ForEach(%x) = %x, want %x", kind, prefix, got, want)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	t.Run("ErrStop", func(t *testing.T) {
		view(t, s, func(tx store.Tx) error {
			n := 0
			err := tx.Bucket("kv").ForEach(nil, func(_, _ []byte) error {
				n++
				if n == 3 {
					return store.ErrStop
				}
				return nil
			})
			if err != nil || n != 3 {
				t.Errorf("ForEach with ErrStop after 3 keys = %v after %d keys, want nil after 3", err, n)
			}
			return nil
		})
	})
	t.Run("Error", func(t *testing.T) {
		view(t, s, func(tx store.Tx) error {
			errMine := errors.New("mine")
			n := 0
			err := tx.Bucket("kv").ForEach([]byte("a"), func(_, _ []byte) error {
				n++
				return errMine
			})
			if err != errMine || n != 1 {
				t.Errorf("ForEach returning an error = %v after %d keys, want errMine after 1", err, n)
			}
			return nil
		})
	})
}

func testForEachWhileWriting(t *testing.T, s store.Store) {
	var kv []string
	for i := range 200 {
		kv = append(kv, fmt.Sprintf("k%03d", i), "old")
	}
	put(t, s, "kv", append(kv, "j", "x", "l", "x")...)
	// Rewrite every visited key, and delete every third one.
	update(t, s, func(tx store.Tx) error {
		b := tx.Bucket("kv")
		seen := map[string]int{}
		err := b.ForEach([]byte("k"), func(k, v []byte) error {
			seen[string(k)]++
			if string(v) != "old" {
				t.Errorf("%s = %q while walking, want old", k, v)
			}
			if len(seen)%3 == 0 {
				return b.Delete(k)
			}
			return b.Put(k, []byte("new"))
		})
		if err != nil {
			return err
		}
		if len(seen) != 200 {
			t.Errorf("ForEach visited %d distinct keys, want 200", len(seen))
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("ForEach visited %s %d times", k, n)
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		n := 0
		err := tx.Bucket("kv").ForEach([]byte("k"), func(k, v []byte) error {
			n++
			if string(v) != "new" {
				t.Errorf("%s = %q, want new", k, v)
			}
			return nil
		})
		if want := 200 - 200/3; n != want {
			t.Errorf("%d keys left, want %d", n, want)
		}
		return err
	})
	if got := get(t, s, "kv", "j") + get(t, s, "kv", "l"); got != "xx" {
		t.Errorf("keys outside the prefix changed: %s", got)
	}
}

func testCursor(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, n := range []uint64{30, 10, 50, 20, 40} {
			if err := tx.Bucket("c").Put(store.Uint64Key(n), []byte(fmt.Sprint(n))); err != nil {
				return err
			}
		}
		return nil
	})
	num := func(k, v []byte) string {
		if k == nil {
			if v != nil {
				t.Errorf("nil key with value %q", v)
			}
			return "end"
		}
		if got := fmt.Sprint(store.KeyUint64(k)); got != string(v) {
			t.Errorf("key %s has value %q", got, v)
		}
		return fmt.Sprint(store.KeyUint64(k))
	}
	view(t, s, func(tx store.Tx) error {
		c := tx.Bucket("c").Cursor()
		var fwd, rev []string
		for k, v := c.First(); k != nil; k, v = c.Next() {
			fwd = append(fwd, num(k, v))
		}
		fwd = append(fwd, num(c.Next()))
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			rev = append(rev, num(k, v))
		}
		rev = append(rev, num(c.Prev()))
		if got, want := fmt.Sprint(fwd), "[10 20 30 40 50 end]"; got != want {
			t.Errorf("forward walk = %s, want %s", got, want)
		}
		if got, want := fmt.Sprint(rev), "[50 40 30 20 10 end]"; got != want {
			t.Errorf("reverse walk = %s, want %s", got, want)
		}
		for _, tc := range []struct {
			seek uint64
			want string
		}{{0, "10"}, {5, "10"}, {10, "10"}, {25, "30"}, {50, "50"}, {55, "end"}} {
			if got := num(c.Seek(store.Uint64Key(tc.seek))); got != tc.want {
				t.Errorf("Seek(%d) = %s, want %s", tc.seek, got, tc.want)
			}
		}
		// The newest entry below a bound: Seek then Prev.
		if got := num(c.Seek(store.Uint64Key(35))) + "," + num(c.Prev()) + "," + num(c.Next()); got != "40,30,40" {
			t.Errorf("Seek(35),Prev,Next = %s, want 40,30,40", got)
		}
		if got := num(c.Seek(store.Uint64Key(55))); got != "end" {
			t.Errorf("Seek past the end = %s", got)
		}
		if got := num(c.Last()) + "," + num(c.Next()); got != "50,end" {
			t.Errorf("Last,Next = %s, want 50,end", got)
		}
		if got := num(c.First()) + "," + num(c.Prev()); got != "10,end" {
			t.Errorf("First,Prev = %s, want 10,end", got)
		}
		return nil
	})
}

func testSequence(t *testing.T, s store.Store) {
	next := func(tx store.Tx, bucket string) uint64 {
		n, err := tx.Bucket(bucket).NextSequence()
		if err != nil {
			t.Errorf("NextSequence(%s): %v", bucket, err)
		}
		return n
	}
	var got []uint64
	update(t, s, func(tx store.Tx) error {
		got = []uint64{next(tx, "s"), next(tx, "s"), tx.Bucket("s").Sequence()}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		got = append(got, next(tx, "s"), next(tx, "other"))
		return nil
	})
	if want := []uint64{1, 2, 2, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("sequence values = %v, want %v", got, want)
	}
	errAbort := errors.New("abort")
	for range 2 {
		if err := s.Update(t.Context(), func(tx store.Tx) error {
			next(tx, "s")
			next(tx, "s")
			return errAbort
		}); err != errAbort {
			t.Fatalf("Update = %v, want errAbort", err)
		}
	}
	view(t, s, func(tx store.Tx) error {
		if n := tx.Bucket("s").Sequence(); n != 3 {
			t.Errorf("Sequence after rolled-back transactions = %d, want 3 (a rolled-back tx does not advance it)", n)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		if n := next(tx, "s"); n != 4 {
			t.Errorf("NextSequence after rolled-back transactions = %d, want 4", n)
		}
		return nil
	})
}

func testDeleteBucket(t *testing.T, s store.Store) {
	put(t, s, "a", "k1", "1", "k2", "2")
	put(t, s, "b", "k1", "b1")
	update(t, s, func(tx store.Tx) error {
		_, err := tx.Bucket("a").NextSequence()
		return err
	})
	update(t, s, func(tx store.Tx) error {
		old := tx.Bucket("a")
		if got := show(old.Get([]byte("k1"))); got != "1" {
			t.Errorf("a/k1 = %s before DeleteBucket", got)
		}
		if err := tx.DeleteBucket("a"); err != nil {
			return err
		}
		for name, b := range map[string]store.Bucket{"handle from before": old, "new handle": tx.Bucket("a")} {
			if v := b.Get([]byte("k1")); v != nil {
				t.Errorf("%s: k1 = %q after DeleteBucket", name, v)
			}
			if err := b.ForEach(nil, func(k, _ []byte) error { return fmt.Errorf("visited %q", k) }); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if n := b.Sequence(); n != 0 {
				t.Errorf("%s: Sequence = %d after DeleteBucket, want 0", name, n)
			}
		}
		if err := tx.DeleteBucket("a"); err != nil {
			t.Errorf("second DeleteBucket = %v, want nil", err)
		}
		// Writing recreates the bucket, through either handle.
		if err := old.Put([]byte("k3"), []byte("3")); err != nil {
			return err
		}
		if got := show(tx.Bucket("a").Get([]byte("k3"))); got != "3" {
			t.Errorf("a/k3 = %s in the recreated bucket", got)
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		var keys []string
		_ = tx.Bucket("a").ForEach(nil, func(k, _ []byte) error { keys = append(keys, string(k)); return nil })
		if fmt.Sprint(keys) != "[k3]" {
			t.Errorf("bucket a holds %v, want [k3]", keys)
		}
		if got := show(tx.Bucket("b").Get([]byte("k1"))); got != "b1" {
			t.Errorf("b/k1 = %s, another bucket was touched", got)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		if n, err := tx.Bucket("a").NextSequence(); err != nil || n != 1 {
			t.Errorf("NextSequence in a recreated bucket = %d, %v, want 1", n, err)
		}
		return nil
	})
}

type codedError struct{ code int }

func (e *codedError) Error() string { return fmt.Sprintf("code %d", e.code) }

func testErrorRollsBack(t *testing.T, s store.Store) {
	put(t, s, "x", "k", "old")
	put(t, s, "y", "k", "y")
	put(t, s, "z", "k", "z")
	errMine := &codedError{code: 7}
	var ran int
	err := s.Update(t.Context(), func(tx store.Tx) error {
		ran++
		for _, step := range []func() error{
			func() error { return tx.Bucket("x").Put([]byte("k"), []byte("new")) },
			func() error { return tx.Bucket("x").Put([]byte("n"), []byte("1")) },
			func() error { return tx.Bucket("y").Delete([]byte("k")) },
			func() error { return tx.DeleteBucket("z") },
			func() error { _, err := tx.Bucket("x").NextSequence(); return err },
			func() error { _, err := store.BumpConfigRevision(tx); return err },
			func() error { return tx.Bucket("w").Put([]byte("k"), []byte("w")) },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return errMine
	})
	if err != errMine {
		t.Fatalf("Update = %v (%T), want the function's own error value", err, err)
	}
	if ran == 0 {
		t.Fatal("function did not run")
	}
	view(t, s, func(tx store.Tx) error {
		got := fmt.Sprint(
			show(tx.Bucket("x").Get([]byte("k"))), show(tx.Bucket("x").Get([]byte("n"))),
			show(tx.Bucket("y").Get([]byte("k"))), show(tx.Bucket("z").Get([]byte("k"))),
			tx.Bucket("x").Sequence(), store.ConfigRevision(tx), show(tx.Bucket("w").Get([]byte("k"))),
		)
		if want := fmt.Sprint("old", "<nil>", "y", "z", 0, 0, "<nil>"); got != want {
			t.Errorf("state after a failed Update = %s, want %s", got, want)
		}
		return nil
	})
}

func testPanic(t *testing.T, s store.Store) {
	put(t, s, "kv", "k", "old")
	err := s.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.Bucket("kv").Put([]byte("k"), []byte("new")); err != nil {
			return err
		}
		panic("boom")
	})
	if err == nil {
		t.Fatal("Update with a panicking function = nil, want an error")
	}
	if got := get(t, s, "kv", "k"); got != "old" {
		t.Errorf("k = %s after a panicking Update, want old", got)
	}
	if err := s.View(t.Context(), func(store.Tx) error { panic("boom in view") }); err == nil {
		t.Error("View with a panicking function = nil, want an error")
	}
	put(t, s, "kv", "k", "after")
	if got := get(t, s, "kv", "k"); got != "after" {
		t.Errorf("k = %s, the store stopped working after a panic", got)
	}
}

// parallel runs fn(i) on n goroutines and waits for them.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

func increment(tx store.Tx, bucket string, key []byte) error {
	b := tx.Bucket(bucket)
	return b.Put(key, store.Uint64Key(store.KeyUint64(b.Get(key))+1))
}

func testConcurrentCounter(t *testing.T, s store.Store) {
	const goroutines, each = 32, 50
	key := []byte("counter")
	parallel(goroutines, func(int) {
		for range each {
			if err := s.Update(t.Context(), func(tx store.Tx) error {
				return increment(tx, "c", key)
			}); err != nil {
				t.Errorf("Update: %v", err)
				return
			}
		}
	})
	view(t, s, func(tx store.Tx) error {
		if n := store.KeyUint64(tx.Bucket("c").Get(key)); n != goroutines*each {
			t.Errorf("counter = %d, want %d: increments were lost", n, goroutines*each)
		}
		return nil
	})
}

func testConcurrentKeys(t *testing.T, s store.Store) {
	const goroutines, each = 16, 40
	parallel(goroutines, func(g int) {
		for i := range each {
			k := fmt.Sprintf("g%02d/%03d", g, i)
			if err := s.Update(t.Context(), func(tx store.Tx) error {
				return tx.Bucket("keys").Put([]byte(k), []byte(k))
			}); err != nil {
				t.Errorf("Update: %v", err)
				return
			}
		}
	})
	view(t, s, func(tx store.Tx) error {
		n := 0
		err := tx.Bucket("keys").ForEach(nil, func(k, v []byte) error {
			n++
			if !bytes.Equal(k, v) {
				t.Errorf("%s = %s", k, v)
			}
			return nil
		})
		if n != goroutines*each {
			t.Errorf("%d keys, want %d", n, goroutines*each)
		}
		return err
	})
}

// testConcurrentFailures runs succeeding and failing functions at the same
// time, so that a backend that batches writers puts them together: the
// succeeding ones must take effect exactly once, the failing ones never.
func testConcurrentFailures(t *testing.T, s store.Store) {
	const goroutines, rounds = 24, 6
	errFail := errors.New("fail on purpose")
	var mu sync.Mutex
	succeeded := 0
	parallel(goroutines, func(g int) {
		for r := range rounds {
			fail := (g+r)%3 == 0
			key := []byte(fmt.Sprintf("%02d/%d", g, r))
			err := s.Update(t.Context(), func(tx store.Tx) error {
				if err := increment(tx, "c", []byte("n")); err != nil {
					return err
				}
				if fail {
					if err := tx.Bucket("bad").Put(key, nil); err != nil {
						return err
					}
					return fmt.Errorf("round %d: %w", r, errFail)
				}
				return tx.Bucket("good").Put(key, nil)
			})
			switch {
			case fail && !errors.Is(err, errFail):
				t.Errorf("failing function: Update = %v, want errFail", err)
			case !fail && err != nil:
				t.Errorf("succeeding function: Update = %v", err)
			case !fail:
				mu.Lock()
				succeeded++
				mu.Unlock()
			}
		}
	})
	view(t, s, func(tx store.Tx) error {
		count := func(bucket string) int {
			n := 0
			_ = tx.Bucket(bucket).ForEach(nil, func(_, _ []byte) error { n++; return nil })
			return n
		}
		if n := store.KeyUint64(tx.Bucket("c").Get([]byte("n"))); n != uint64(succeeded) {
			t.Errorf("counter = %d, want %d (one per succeeding function)", n, succeeded)
		}
		if n := count("good"); n != succeeded {
			t.Errorf("%d keys from succeeding functions, want %d", n, succeeded)
		}
		if n := count("bad"); n != 0 {
			t.Errorf("%d keys from failing functions were kept", n)
		}
		return nil
	})
}

func testConfigRevision(t *testing.T, s store.Store) {
	rev := func() uint64 {
		var n uint64
		view(t, s, func(tx store.Tx) error { n = store.ConfigRevision(tx); return nil })
		return n
	}
	if n := rev(); n != 0 {
		t.Errorf("new store at revision %d, want 0", n)
	}
	view(t, s, func(tx store.Tx) error {
		if _, err := store.BumpConfigRevision(tx); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("BumpConfigRevision in View = %v, want ErrReadOnly", err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		for want := uint64(1); want <= 2; want++ {
			if n, err := store.BumpConfigRevision(tx); err != nil || n != want {
				t.Errorf("BumpConfigRevision = %d, %v, want %d", n, err, want)
			}
		}
		if n := store.ConfigRevision(tx); n != 2 {
			t.Errorf("ConfigRevision in the same tx = %d, want 2", n)
		}
		return nil
	})
	if n := rev(); n != 2 {
		t.Errorf("revision after commit = %d, want 2", n)
	}
	errAbort := errors.New("abort")
	if err := s.Update(t.Context(), func(tx store.Tx) error {
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return errAbort
	}); err != errAbort {
		t.Fatalf("Update = %v, want errAbort", err)
	}
	if n := rev(); n != 2 {
		t.Errorf("revision after a rolled-back bump = %d, want 2", n)
	}
}

type record struct {
	store.Versioned
	Name  string   `json:"name"`
	Count int      `json:"count"`
	Tags  []string `json:"tags"`
}

func testJSON(t *testing.T, s store.Store) {
	in := record{Versioned: store.Versioned{Schema: 3}, Name: "alice", Count: 2, Tags: []string{"x", "y"}}
	update(t, s, func(tx store.Tx) error {
		b := tx.Bucket("j")
		if err := store.PutJSON(b, []byte("alice"), in); err != nil {
			return err
		}
		if err := store.PutJSON(b, []byte("bad"), make(chan int)); err == nil {
			t.Error("PutJSON(chan) = nil, want an error")
		}
		return b.Put([]byte("broken"), []byte("{"))
	})
	view(t, s, func(tx store.Tx) error {
		b := tx.Bucket("j")
		var out record
		if err := store.GetJSON(b, []byte("alice"), &out); err != nil {
			t.Errorf("GetJSON: %v", err)
		}
		if fmt.Sprint(out) != fmt.Sprint(in) {
			t.Errorf("GetJSON = %+v, want %+v", out, in)
		}
		if raw := string(b.Get([]byte("alice"))); !bytes.Contains([]byte(raw), []byte(`"schema":3`)) {
			t.Errorf("stored JSON %s lacks the schema version", raw)
		}
		if err := store.GetJSON(b, []byte("missing"), &out); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetJSON(missing) = %v, want ErrNotFound", err)
		}
		if err := store.GetJSON(tx.Bucket("no-bucket"), []byte("alice"), &out); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetJSON in a missing bucket = %v, want ErrNotFound", err)
		}
		if err := store.GetJSON(b, []byte("broken"), &out); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetJSON(broken) = %v, want a decode error", err)
		}
		return nil
	})
}

func testContextDone(t *testing.T, s store.Store) {
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"canceled", canceled, context.Canceled}, {"deadline", expired, context.DeadlineExceeded}} {
		ran := false
		fn := func(tx store.Tx) error {
			ran = true
			return tx.Bucket("kv").Put([]byte("k"), []byte("v"))
		}
		if err := s.Update(tc.ctx, fn); !errors.Is(err, tc.want) {
			t.Errorf("%s: Update = %v, want %v", tc.name, err, tc.want)
		}
		if err := s.View(tc.ctx, func(store.Tx) error { ran = true; return nil }); !errors.Is(err, tc.want) {
			t.Errorf("%s: View = %v, want %v", tc.name, err, tc.want)
		}
		if ran {
			t.Errorf("%s: a function ran with a done context", tc.name)
		}
		if snap, ok := s.(store.Snapshotter); ok {
			if _, err := snap.Snapshot(tc.ctx, new(bytes.Buffer)); !errors.Is(err, tc.want) {
				t.Errorf("%s: Snapshot = %v, want %v", tc.name, err, tc.want)
			}
		}
	}
	if got := get(t, s, "kv", "k"); got != "<nil>" {
		t.Errorf("k = %s, want nothing written", got)
	}
}

// testViewIsolation checks that a View keeps seeing its snapshot while an
// Update commits.
func testViewIsolation(t *testing.T, s store.Store) {
	put(t, s, "kv", "k", "1")
	done := make(chan error, 1)
	view(t, s, func(tx store.Tx) error {
		b := tx.Bucket("kv")
		before := show(b.Get([]byte("k")))
		go func() {
			done <- s.Update(context.Background(), func(tx store.Tx) error {
				return tx.Bucket("kv").Put([]byte("k"), []byte("2"))
			})
		}()
		// A backend may make the writer wait for this reader; do not
		// wait for the writer forever.
		select {
		case err := <-done:
			done <- err
		case <-time.After(50 * time.Millisecond):
		}
		if after := show(b.Get([]byte("k"))); before != "1" || after != "1" {
			t.Errorf("View saw k = %s, then %s, want 1 both times", before, after)
		}
		return nil
	})
	if err := <-done; err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got := get(t, s, "kv", "k"); got != "2" {
		t.Errorf("k = %s after the Update, want 2", got)
	}
}

func testLarge(t *testing.T, s store.Store) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	const n, txs = 5000, 4
	update(t, s, func(tx store.Tx) error {
		return tx.Bucket("large").Put([]byte("big"), big)
	})
	// Interleave the transactions' keys so that later ones land between
	// earlier ones.
	for r := range txs {
		update(t, s, func(tx store.Tx) error {
			for i := 1 + r; i <= n; i += txs {
				if err := tx.Bucket("many").Put(store.Uint64Key(uint64(i)), fmt.Appendf(nil, "%d", i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	view(t, s, func(tx store.Tx) error {
		if !bytes.Equal(tx.Bucket("large").Get([]byte("big")), big) {
			t.Error("1 MiB value did not read back")
		}
		next := uint64(1)
		err := tx.Bucket("many").ForEach(nil, func(k, v []byte) error {
			if got := store.KeyUint64(k); got != next || string(v) != fmt.Sprint(next) {
				return fmt.Errorf("key %d (%s), want %d", got, v, next)
			}
			next++
			return nil
		})
		if err != nil || next != n+1 {
			t.Errorf("walk of %d keys: %v, ended at %d", n, err, next)
		}
		return nil
	})
}

// testSnapshot checks what every Snapshotter promises without knowing its
// format: a copy is written in full while writers run. Backends check in
// their own tests that the copy opens and is consistent.
func testSnapshot(t *testing.T, s store.Store) {
	snap, ok := s.(store.Snapshotter)
	if !ok {
		t.Skip("store is not a Snapshotter")
	}
	put(t, s, "kv", "k", "v")
	var buf bytes.Buffer
	n, err := snap.Snapshot(t.Context(), &buf)
	if err != nil || n <= 0 || n != int64(buf.Len()) {
		t.Fatalf("Snapshot = %d, %v with %d bytes written, want a positive count equal to the bytes written", n, err, buf.Len())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Update(context.Background(), func(tx store.Tx) error {
					return tx.Bucket("w").Put(fmt.Appendf(nil, "%d/%d", g, i), bytes.Repeat([]byte{'x'}, 100))
				}); err != nil {
					t.Errorf("Update during Snapshot: %v", err)
					return
				}
			}
		})
	}
	for range 3 {
		buf.Reset()
		n, err := snap.Snapshot(t.Context(), &buf)
		if err != nil || n <= 0 || n != int64(buf.Len()) {
			t.Errorf("Snapshot while writing = %d, %v with %d bytes written", n, err, buf.Len())
		}
	}
	close(stop)
	wg.Wait()
}

func testClose(t *testing.T, s store.Store) {
	put(t, s, "kv", "k", "v")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ran := false
	if err := s.Update(t.Context(), func(store.Tx) error { ran = true; return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close = %v, want ErrClosed", err)
	}
	if err := s.View(t.Context(), func(store.Tx) error { ran = true; return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close = %v, want ErrClosed", err)
	}
	if ran {
		t.Error("a function ran after Close")
	}
	if snap, ok := s.(store.Snapshotter); ok {
		if _, err := snap.Snapshot(t.Context(), new(bytes.Buffer)); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Snapshot after Close = %v, want ErrClosed", err)
		}
	}
}
