package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/postgres"
)

// content is a whole store as a map: bucket -> key -> value, and the
// buckets' sequences.
type content struct {
	kv  map[string]map[string]string
	seq map[string]uint64
}

// fill writes data that exercises what a copy must keep: keys with NUL
// and 0xff bytes, empty and large values, sequences with and without
// keys, a bucket name with spaces and non-ASCII letters, and more keys
// than one batch.
func fill(t *testing.T, s store.Store) content {
	t.Helper()
	c := content{kv: map[string]map[string]string{}, seq: map[string]uint64{}}
	put := func(tx store.Tx, bucket string, k, v []byte) error {
		if c.kv[bucket] == nil {
			c.kv[bucket] = map[string]string{}
		}
		c.kv[bucket][string(k)] = string(v)
		return tx.Bucket(bucket).Put(k, v)
	}
	err := s.Update(t.Context(), func(tx store.Tx) error {
		clear(c.kv)
		clear(c.seq)
		for i := range 250 {
			if err := put(tx, "tokens", fmt.Appendf(nil, "HOTP%06d", i), fmt.Appendf(nil, `{"schema":1,"n":%d}`, i)); err != nil {
				return err
			}
		}
		for _, k := range [][]byte{{0}, {0, 0}, {0xff}, {0xff, 0xff, 0}, []byte("a\x00b")} {
			if err := put(tx, "binary", k, bytes.Repeat(k, 3)); err != nil {
				return err
			}
		}
		if err := put(tx, "binary", []byte("empty"), []byte{}); err != nil {
			return err
		}
		if err := put(tx, "binary", []byte("large"), bytes.Repeat([]byte("x"), 300<<10)); err != nil {
			return err
		}
		audit := tx.Bucket("audit")
		for range 40 {
			n, err := audit.NextSequence()
			if err != nil {
				return err
			}
			if n%2 == 0 { // gaps, as retention leaves them
				if err := put(tx, "audit", store.Uint64Key(n), fmt.Appendf(nil, "entry %d", n)); err != nil {
					return err
				}
			}
		}
		c.seq["audit"] = 40
		for range 3 { // a sequence and no key
			if _, err := tx.Bucket("only sequence").NextSequence(); err != nil {
				return err
			}
		}
		c.seq["only sequence"] = 3
		if err := put(tx, "Réalms und Räume", []byte("k"), []byte("v")); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		c.kv[store.MetaBucket] = map[string]string{"config_revision": string(store.Uint64Key(1))}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// read reads a whole store through the store interface.
func read(t *testing.T, s store.Store) content {
	t.Helper()
	c := content{kv: map[string]map[string]string{}, seq: map[string]uint64{}}
	err := s.View(t.Context(), func(tx store.Tx) error {
		names, err := tx.(store.BucketLister).BucketNames()
		if err != nil {
			return err
		}
		if !slices.IsSorted(names) {
			t.Errorf("BucketNames %q: not in byte order", names)
		}
		for _, name := range names {
			b := tx.Bucket(name)
			if n := b.Sequence(); n > 0 {
				c.seq[name] = n
			}
			if err := b.ForEach(nil, func(k, v []byte) error {
				if c.kv[name] == nil {
					c.kv[name] = map[string]string{}
				}
				c.kv[name][string(k)] = string(v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sameContent(t *testing.T, what string, got, want content) {
	t.Helper()
	if !maps.Equal(got.seq, want.seq) {
		t.Errorf("%s: sequences %v, want %v", what, got.seq, want.seq)
	}
	if !maps.EqualFunc(got.kv, want.kv, func(a, b map[string]string) bool { return maps.Equal(a, b) }) {
		for name := range want.kv {
			if !maps.Equal(got.kv[name], want.kv[name]) {
				t.Errorf("%s: bucket %q: %d keys, want %d (or values differ)", what, name, len(got.kv[name]), len(want.kv[name]))
			}
		}
		for name := range got.kv {
			if _, ok := want.kv[name]; !ok {
				t.Errorf("%s: extra bucket %q", what, name)
			}
		}
	}
}

func openPostgres(t *testing.T, pg *testsvc.PostgresServer, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), pg.DSN(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestCopyRoundTrip copies a bbolt store into PostgreSQL and back into a
// new bbolt file, in small batches, and finds every key, value and
// sequence in both copies; the copies go on handing out the sequence's
// next numbers.
func TestCopyRoundTrip(t *testing.T) {
	pg := testsvc.Postgres(t)
	dir := t.TempDir()
	src := bolt.OpenForTest(t, filepath.Join(dir, "src.db"))
	want := fill(t, src)
	// An empty bucket (bbolt keeps it) is not copied.
	if err := src.Update(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket("emptied")
		if err := b.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		return b.Delete([]byte("k"))
	}); err != nil {
		t.Fatal(err)
	}
	sameContent(t, "source", read(t, src), want)

	mid := openPostgres(t, pg, "copy_mid")
	var progress int
	res, err := store.Copy(t.Context(), mid, src, store.CopyOptions{BatchKeys: 16, BatchBytes: 64 << 10,
		Progress: func(string, int64) { progress++ }})
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, "bbolt -> PostgreSQL", read(t, mid), want)
	var keys int64
	for _, b := range want.kv {
		keys += int64(len(b))
	}
	if res.Keys != keys || len(res.Buckets) != len(want.kv)+1 { // + "only sequence"
		t.Errorf("result: %d keys in %d buckets, want %d in %d", res.Keys, len(res.Buckets), keys, len(want.kv)+1)
	}
	// 250 tokens at 16 a batch alone need 16 commits; the large value
	// fills a batch of its own.
	if res.Commits < 16+2 || progress != res.Commits {
		t.Errorf("%d commits, %d progress calls: want at least 18, one call each", res.Commits, progress)
	}

	back := bolt.OpenForTest(t, filepath.Join(dir, "back.db"))
	if _, err := store.Copy(t.Context(), back, mid, store.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	sameContent(t, "PostgreSQL -> bbolt", read(t, back), want)

	for name, s := range map[string]store.Store{"postgres": mid, "bolt": back} {
		if err := s.Update(t.Context(), func(tx store.Tx) error {
			n, err := tx.Bucket("audit").NextSequence()
			if err == nil && n != 41 {
				t.Errorf("%s: the copy's next audit sequence is %d, want 41", name, n)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCopyRefusesData checks that a destination holding data (a key, or
// only a sequence) is refused, and that Force replaces it.
func TestCopyRefusesData(t *testing.T) {
	pg := testsvc.Postgres(t)
	dir := t.TempDir()
	src := bolt.OpenForTest(t, filepath.Join(dir, "src.db"))
	want := fill(t, src)

	for name, seed := range map[string]func(tx store.Tx) error{
		"key": func(tx store.Tx) error { return tx.Bucket("other").Put([]byte("stale"), []byte("1")) },
		"sequence": func(tx store.Tx) error {
			_, err := tx.Bucket("audit").NextSequence()
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			for kind, dst := range map[string]store.Store{
				"bolt":     bolt.OpenForTest(t, filepath.Join(t.TempDir(), "dst.db")),
				"postgres": openPostgres(t, pg, "refuse_"+name),
			} {
				if err := dst.Update(t.Context(), seed); err != nil {
					t.Fatal(err)
				}
				_, err := store.Copy(t.Context(), dst, src, store.CopyOptions{})
				if !errors.Is(err, store.ErrNotEmpty) {
					t.Fatalf("%s: copy onto data: %v, want ErrNotEmpty", kind, err)
				}
				res, err := store.Copy(t.Context(), dst, src, store.CopyOptions{Force: true})
				if err != nil {
					t.Fatalf("%s: -force: %v", kind, err)
				}
				if res.Cleared != 1 {
					t.Errorf("%s: cleared %d buckets, want 1", kind, res.Cleared)
				}
				sameContent(t, kind+" after Force", read(t, dst), want)
			}
		})
	}
}

// TestCopyVerifies checks that the verification finds a destination that
// differs from the source: a store whose writes lose a key.
func TestCopyVerifies(t *testing.T) {
	dir := t.TempDir()
	src := bolt.OpenForTest(t, filepath.Join(dir, "src.db"))
	fill(t, src)
	dst := &dropping{Store: bolt.OpenForTest(t, filepath.Join(dir, "dst.db")), drop: []byte("HOTP000007")}
	_, err := store.Copy(t.Context(), dst, src, store.CopyOptions{})
	if err == nil || !strings.Contains(err.Error(), `bucket "tokens": 249 keys, want 250`) {
		t.Fatalf("copy into a store that loses a key: %v", err)
	}
}

// dropping is a store whose Put silently ignores one key.
type dropping struct {
	store.Store
	drop []byte
}

func (d *dropping) Update(ctx context.Context, fn func(store.Tx) error) error {
	return d.Store.Update(ctx, func(tx store.Tx) error { return fn(droppingTx{tx.(txLister), d.drop}) })
}

type txLister interface {
	store.Tx
	store.BucketLister
}

type droppingTx struct {
	txLister
	drop []byte
}

func (t droppingTx) Bucket(name string) store.Bucket {
	return droppingBucket{t.txLister.Bucket(name), t.drop}
}

type droppingBucket struct {
	store.Bucket
	drop []byte
}

func (b droppingBucket) Put(k, v []byte) error {
	if bytes.Equal(k, b.drop) {
		return nil
	}
	return b.Bucket.Put(k, v)
}

func (b droppingBucket) SetSequence(n uint64) error {
	return b.Bucket.(store.SequenceSetter).SetSequence(n)
}

// BenchmarkCopy copies a bbolt store of 20,000 token-sized records into
// PostgreSQL and back; keys/s is the throughput of each direction.
func BenchmarkCopy(b *testing.B) {
	pg := testsvc.Postgres(b)
	dir := b.TempDir()
	src := bolt.OpenForTest(b, filepath.Join(dir, "src.db"))
	const n = 20000
	value := bytes.Repeat([]byte("v"), 400)
	if err := src.Update(b.Context(), func(tx store.Tx) error {
		for i := range n {
			if err := tx.Bucket("tokens").Put(fmt.Appendf(nil, "HOTP%08d", i), value); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	i := 0
	var toPG, toBolt time.Duration
	for b.Loop() {
		i++
		mid, err := postgres.Open(b.Context(), pg.DSN(), postgres.Options{Schema: fmt.Sprintf("bench%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := store.Copy(b.Context(), mid, src, store.CopyOptions{}); err != nil {
			b.Fatal(err)
		}
		toPG += time.Since(start)
		back := bolt.OpenForTest(b, filepath.Join(dir, fmt.Sprintf("back%d.db", i)))
		start = time.Now()
		if _, err := store.Copy(b.Context(), back, mid, store.CopyOptions{}); err != nil {
			b.Fatal(err)
		}
		toBolt += time.Since(start)
		_ = mid.Close()
	}
	b.ReportMetric(float64(n*i)/toPG.Seconds(), "keys/s-to-postgres")
	b.ReportMetric(float64(n*i)/toBolt.Seconds(), "keys/s-to-bolt")
}
