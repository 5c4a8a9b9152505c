package bolt

import (
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/authsrv/authsrv/store"
)

var (
	_ store.BucketLister   = (*tx)(nil)
	_ store.SequenceSetter = (*bucket)(nil)
)

// BucketNames returns the names of the file's buckets, in byte order
// (bbolt keeps them sorted), empty ones included.
func (t *tx) BucketNames() ([]string, error) {
	var names []string
	err := t.btx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
		names = append(names, string(name))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list buckets: %w", mapErr(err))
	}
	return names, nil
}

// SetSequence sets the bucket's sequence, creating the bucket if needed.
func (b *bucket) SetSequence(n uint64) error {
	bb, err := b.writable("set sequence")
	if err != nil {
		return err
	}
	if err := bb.SetSequence(n); err != nil {
		return fmt.Errorf("bucket %q: set sequence: %w", b.name, mapErr(err))
	}
	b.tx.mods++
	return nil
}
