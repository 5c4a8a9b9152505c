package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/authsrv/authsrv/store"
)

// errEmptyKey is returned by Put for an empty key.
var errEmptyKey = errors.New("empty key")

// tx is a store.Tx over one bbolt transaction. Like bbolt's, it is not safe
// for use by several goroutines at once, nor after its function returns.
type tx struct {
	btx  *bbolt.Tx
	gen  int // bumped by DeleteBucket: bucket handles must look up again
	mods int // bumped by every write: open iterations must re-seek
	// run is the state the functions of one commit share (PreCommit),
	// each owning the hooks it registers by its index in the batch; nil
	// for read transactions.
	run *store.PreCommits[int]
}

func newTx(btx *bbolt.Tx) *tx { return &tx{btx: btx} }

var _ store.PreCommitter = (*tx)(nil)

// PreCommit keeps key's value for this run of the transaction and
// registers its hook (see store.PreCommitter).
func (t *tx) PreCommit(key any, start func() (any, func(store.Tx) error)) any {
	return t.run.PreCommit(key, start)
}

func (t *tx) Writable() bool { return t.btx.Writable() }

// Bucket returns a handle that finds its bbolt bucket when first used and
// creates it on the first write.
func (t *tx) Bucket(name string) store.Bucket { return &bucket{tx: t, name: name} }

func (t *tx) DeleteBucket(name string) error {
	if !t.btx.Writable() {
		return fmt.Errorf("delete bucket %q: %w", name, store.ErrReadOnly)
	}
	err := t.btx.DeleteBucket([]byte(name))
	if errors.Is(err, berrors.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete bucket %q: %w", name, mapErr(err))
	}
	t.gen++
	t.mods++
	return nil
}

type bucket struct {
	tx   *tx
	name string
	b    *bbolt.Bucket // cached lookup, valid while gen == tx.gen
	gen  int
}

// lookup returns the bbolt bucket, or nil when it does not exist.
func (b *bucket) lookup() *bbolt.Bucket {
	if b.b == nil || b.gen != b.tx.gen {
		b.b = b.tx.btx.Bucket([]byte(b.name))
		b.gen = b.tx.gen
	}
	return b.b
}

// writable returns the bbolt bucket for a write, creating it if needed.
func (b *bucket) writable(op string) (*bbolt.Bucket, error) {
	if !b.tx.btx.Writable() {
		return nil, fmt.Errorf("bucket %q: %s: %w", b.name, op, store.ErrReadOnly)
	}
	if bb := b.lookup(); bb != nil {
		return bb, nil
	}
	bb, err := b.tx.btx.CreateBucketIfNotExists([]byte(b.name))
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %s: create bucket: %w", b.name, op, mapErr(err))
	}
	b.b, b.gen = bb, b.tx.gen
	return bb, nil
}

func (b *bucket) Get(key []byte) []byte {
	if len(key) == 0 {
		return nil
	}
	bb := b.lookup()
	if bb == nil {
		return nil
	}
	return bb.Get(key)
}

// Put copies key and value, so the caller may reuse its buffers. A nil
// value is stored as an empty one.
func (b *bucket) Put(key, value []byte) error {
	if !b.tx.btx.Writable() {
		return fmt.Errorf("bucket %q: put: %w", b.name, store.ErrReadOnly)
	}
	if len(key) == 0 {
		return fmt.Errorf("bucket %q: put: %w", b.name, errEmptyKey)
	}
	bb, err := b.writable("put")
	if err != nil {
		return err
	}
	if isAppend(bb, key) {
		bb.FillPercent = appendFillPercent
	}
	// bbolt keeps value until commit; copy it (never nil: a nil value
	// would read back as a missing key).
	v := append(make([]byte, 0, len(value)), value...)
	if err := bb.Put(key, v); err != nil {
		return fmt.Errorf("bucket %q: put %d-byte key, %d-byte value: %w", b.name, len(key), len(value), mapErr(err))
	}
	b.tx.mods++
	return nil
}

// appendFillPercent is how full bbolt fills the pages it splits in a
// bucket that a transaction appends to. Its default, half full, suits
// keys that arrive in any order; keys that only ever grow (the audit log,
// keyed by its sequence) would leave every page half empty forever,
// which doubles the file and the pages that bbolt tracks in memory.
const appendFillPercent = 1.0

// isAppend reports whether key is the number the bucket's sequence just
// handed out (store.Uint64Key(NextSequence())): such keys only grow.
func isAppend(bb *bbolt.Bucket, key []byte) bool {
	seq := bb.Sequence()
	return len(key) == 8 && seq > 0 && binary.BigEndian.Uint64(key) == seq
}

func (b *bucket) Delete(key []byte) error {
	if !b.tx.btx.Writable() {
		return fmt.Errorf("bucket %q: delete: %w", b.name, store.ErrReadOnly)
	}
	bb := b.lookup()
	if bb == nil || len(key) == 0 {
		return nil
	}
	if err := bb.Delete(key); err != nil {
		return fmt.Errorf("bucket %q: delete: %w", b.name, mapErr(err))
	}
	b.tx.mods++
	return nil
}

// ForEach walks the keys that start with prefix. In a write transaction fn
// may write, also to this bucket (deleting the key it was given is fine):
// the walk then finds its place again after the last key it visited, and
// sees later keys as they are at that moment.
func (b *bucket) ForEach(prefix []byte, fn func(k, v []byte) error) error {
	bb := b.lookup()
	if bb == nil {
		return nil
	}
	writable := b.tx.btx.Writable()
	c := bb.Cursor()
	var k, v []byte
	if len(prefix) == 0 {
		k, v = c.First()
	} else {
		k, v = c.Seek(prefix)
	}
	var last []byte
	for k != nil && bytes.HasPrefix(k, prefix) {
		mods := b.tx.mods
		if writable {
			last = append(last[:0], k...)
		}
		if err := fn(k, v); err != nil {
			if errors.Is(err, store.ErrStop) {
				return nil
			}
			return err
		}
		if writable && b.tx.mods != mods {
			// The bucket may have changed under the cursor.
			if bb = b.lookup(); bb == nil {
				return nil
			}
			c = bb.Cursor()
			if k, v = c.Seek(last); k != nil && bytes.Equal(k, last) {
				k, v = c.Next()
			}
			continue
		}
		k, v = c.Next()
	}
	return nil
}

func (b *bucket) Cursor() store.Cursor {
	bb := b.lookup()
	if bb == nil {
		return emptyCursor{}
	}
	return cursor{bb.Cursor()}
}

func (b *bucket) NextSequence() (uint64, error) {
	bb, err := b.writable("next sequence")
	if err != nil {
		return 0, err
	}
	n, err := bb.NextSequence()
	if err != nil {
		return 0, fmt.Errorf("bucket %q: next sequence: %w", b.name, mapErr(err))
	}
	b.tx.mods++
	return n, nil
}

func (b *bucket) Sequence() uint64 {
	bb := b.lookup()
	if bb == nil {
		return 0
	}
	return bb.Sequence()
}

// cursor wraps bbolt's; our buckets hold no nested buckets, so every key
// it returns has a value.
type cursor struct{ c *bbolt.Cursor }

func (c cursor) First() (k, v []byte)          { return c.c.First() }
func (c cursor) Last() (k, v []byte)           { return c.c.Last() }
func (c cursor) Seek(key []byte) (k, v []byte) { return c.c.Seek(key) }
func (c cursor) Next() (k, v []byte)           { return c.c.Next() }
func (c cursor) Prev() (k, v []byte)           { return c.c.Prev() }

// emptyCursor walks a bucket that does not exist.
type emptyCursor struct{}

func (emptyCursor) First() (k, v []byte)      { return nil, nil }
func (emptyCursor) Last() (k, v []byte)       { return nil, nil }
func (emptyCursor) Seek([]byte) (k, v []byte) { return nil, nil }
func (emptyCursor) Next() (k, v []byte)       { return nil, nil }
func (emptyCursor) Prev() (k, v []byte)       { return nil, nil }
