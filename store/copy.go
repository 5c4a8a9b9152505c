package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
)

// ErrNotEmpty is wrapped by Copy's error when the destination already
// holds data and CopyOptions.Force is not set.
var ErrNotEmpty = errors.New("store: the destination holds data")

// ErrNoBucketList is wrapped by Copy's error when a store's transactions
// cannot name their buckets (they are not a BucketLister), or its buckets
// cannot take a sequence (not a SequenceSetter).
var ErrNoBucketList = errors.New("store: the backend cannot list its buckets or set their sequences")

// Bounds of one write transaction of Copy, for the zero CopyOptions: a
// large store is copied in many bounded commits, never in one transaction
// that a networked backend would have to hold open for the whole copy.
const (
	DefaultCopyBatchKeys  = 1000
	DefaultCopyBatchBytes = 4 << 20
)

// CopyOptions tunes Copy. The zero value is ready to use.
type CopyOptions struct {
	// Force deletes what the destination holds before copying, instead
	// of refusing.
	Force bool
	// BatchKeys and BatchBytes bound one write transaction on the
	// destination: it commits once it holds this many keys or this many
	// bytes of keys and values. 0 means DefaultCopyBatchKeys and
	// DefaultCopyBatchBytes.
	BatchKeys  int
	BatchBytes int
	// Progress, when set, is called after every commit with the bucket
	// and the number of its keys copied so far.
	Progress func(bucket string, keys int64)
}

// CopiedBucket is what Copy copied of one bucket, and checked.
type CopiedBucket struct {
	Name     string
	Keys     int64
	Bytes    int64 // keys and values
	Sequence uint64
}

// CopyResult is what Copy did.
type CopyResult struct {
	// Buckets lists the copied buckets in byte order.
	Buckets []CopiedBucket
	// Keys and Bytes are the totals.
	Keys  int64
	Bytes int64
	// Commits is the number of write transactions on the destination.
	Commits int
	// Cleared is the number of buckets deleted from the destination
	// first (with Force).
	Cleared int
}

// bucketSum is what Copy checks of a bucket on both sides: the number of
// keys, and a digest of every key and value in order.
type bucketSum struct {
	keys  int64
	bytes int64
	seq   uint64
	sum   [sha256.Size]byte
}

// Copy copies every bucket, key, value and bucket sequence of src into
// dst. It reads src in one View (one consistent snapshot, also while
// servers write to src) and writes dst in Updates of bounded size. dst
// must be empty: a dst holding a key or a sequence is refused with
// ErrNotEmpty unless opts.Force is set, which deletes its buckets first.
// At the end it reads dst back and checks, bucket by bucket, the number of
// keys, a digest of the keys and values and the sequence against what it
// read from src; a difference is an error. Both stores' transactions must
// be BucketListers and dst's buckets SequenceSetters (store/bolt and
// store/postgres are).
//
// Copy is not atomic on dst: when it fails, dst holds part of the data;
// run it again with Force.
func Copy(ctx context.Context, dst, src Store, opts CopyOptions) (CopyResult, error) {
	if opts.BatchKeys <= 0 {
		opts.BatchKeys = DefaultCopyBatchKeys
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = DefaultCopyBatchBytes
	}
	var res CopyResult
	cleared, err := clearDst(ctx, dst, opts.Force)
	if err != nil {
		return res, err
	}
	res.Cleared = cleared
	want := map[string]bucketSum{}
	err = src.View(ctx, func(tx Tx) error {
		names, err := bucketNames(tx, "source")
		if err != nil {
			return err
		}
		for _, name := range names {
			sum, commits, err := copyBucket(ctx, dst, tx.Bucket(name), name, opts)
			res.Commits += commits
			if err != nil {
				return err
			}
			if sum.keys == 0 && sum.seq == 0 {
				continue // an empty bucket: nothing to copy
			}
			want[name] = sum
			res.Buckets = append(res.Buckets, CopiedBucket{Name: name, Keys: sum.keys, Bytes: sum.bytes, Sequence: sum.seq})
			res.Keys += sum.keys
			res.Bytes += sum.bytes
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("store: copy: %w", err)
	}
	if err := verifyCopy(ctx, dst, want); err != nil {
		return res, err
	}
	return res, nil
}

// bucketNames lists tx's buckets.
func bucketNames(tx Tx, which string) ([]string, error) {
	bl, ok := tx.(BucketLister)
	if !ok {
		return nil, fmt.Errorf("%s: %w", which, ErrNoBucketList)
	}
	names, err := bl.BucketNames()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", which, err)
	}
	return names, nil
}

// clearDst refuses a dst that holds data, or with force deletes its
// buckets, one Update each. It returns the number deleted.
func clearDst(ctx context.Context, dst Store, force bool) (int, error) {
	var full []string
	err := dst.View(ctx, func(tx Tx) error {
		names, err := bucketNames(tx, "destination")
		if err != nil {
			return err
		}
		for _, name := range names {
			b := tx.Bucket(name)
			if b.Sequence() > 0 {
				full = append(full, name)
				continue
			}
			if k, _ := b.Cursor().First(); k != nil {
				full = append(full, name)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: copy: %w", err)
	}
	if len(full) == 0 {
		return 0, nil
	}
	if !force {
		shown := full
		if len(shown) > 5 {
			shown = append(slices.Clone(shown[:5]), "...")
		}
		return 0, fmt.Errorf("store: copy: %w: %d buckets (%s)", ErrNotEmpty, len(full), strings.Join(shown, ", "))
	}
	for _, name := range full {
		if err := dst.Update(ctx, func(tx Tx) error { return tx.DeleteBucket(name) }); err != nil {
			return 0, fmt.Errorf("store: copy: clear the destination's bucket %q: %w", name, err)
		}
	}
	return len(full), nil
}

// pair is one key and value of a batch.
type pair struct{ k, v []byte }

// copyBucket copies one bucket of src (read in the caller's transaction)
// into dst in bounded batches; the last one also sets the sequence.
func copyBucket(ctx context.Context, dst Store, b Bucket, name string, opts CopyOptions) (bucketSum, int, error) {
	var sum bucketSum
	h := sha256.New()
	var batch []pair
	size, commits := 0, 0
	flush := func(seq uint64) error {
		if len(batch) == 0 && seq == 0 {
			return nil
		}
		err := dst.Update(ctx, func(tx Tx) error {
			db := tx.Bucket(name)
			for _, p := range batch {
				if err := db.Put(p.k, p.v); err != nil {
					return err
				}
			}
			if seq == 0 {
				return nil
			}
			ss, ok := db.(SequenceSetter)
			if !ok {
				return fmt.Errorf("destination: %w", ErrNoBucketList)
			}
			return ss.SetSequence(seq)
		})
		if err != nil {
			return fmt.Errorf("bucket %q: write: %w", name, err)
		}
		commits++
		batch, size = batch[:0], 0
		if opts.Progress != nil {
			opts.Progress(name, sum.keys)
		}
		return nil
	}
	err := b.ForEach(nil, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		addSum(h, k, v)
		sum.keys++
		sum.bytes += int64(len(k) + len(v))
		batch = append(batch, pair{bytes.Clone(k), append(make([]byte, 0, len(v)), v...)})
		size += len(k) + len(v)
		if len(batch) >= opts.BatchKeys || size >= opts.BatchBytes {
			return flush(0)
		}
		return nil
	})
	if err != nil {
		return sum, commits, fmt.Errorf("bucket %q: %w", name, err)
	}
	sum.seq = b.Sequence()
	if err := flush(sum.seq); err != nil {
		return sum, commits, err
	}
	h.Sum(sum.sum[:0])
	return sum, commits, nil
}

// addSum adds a key and its value to a bucket's digest, each prefixed
// with its length so that no two different contents digest alike.
func addSum(h hash.Hash, k, v []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(k)))
	h.Write(n[:])
	h.Write(k)
	binary.BigEndian.PutUint64(n[:], uint64(len(v)))
	h.Write(n[:])
	h.Write(v)
}

// verifyCopy reads dst back and compares every bucket with want; dst must
// hold no other bucket with data.
func verifyCopy(ctx context.Context, dst Store, want map[string]bucketSum) error {
	var problems []string
	err := dst.View(ctx, func(tx Tx) error {
		names, err := bucketNames(tx, "destination")
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, name := range names {
			seen[name] = true
			b := tx.Bucket(name)
			var got bucketSum
			h := sha256.New()
			if err := b.ForEach(nil, func(k, v []byte) error {
				addSum(h, k, v)
				got.keys++
				return nil
			}); err != nil {
				return fmt.Errorf("bucket %q: %w", name, err)
			}
			h.Sum(got.sum[:0])
			got.seq = b.Sequence()
			w, ok := want[name]
			switch {
			case !ok && (got.keys > 0 || got.seq > 0):
				problems = append(problems, fmt.Sprintf("bucket %q: %d keys that the source does not have", name, got.keys))
			case !ok:
			case got.keys != w.keys:
				problems = append(problems, fmt.Sprintf("bucket %q: %d keys, want %d", name, got.keys, w.keys))
			case got.sum != w.sum:
				problems = append(problems, fmt.Sprintf("bucket %q: keys or values differ", name))
			case got.seq != w.seq:
				problems = append(problems, fmt.Sprintf("bucket %q: sequence %d, want %d", name, got.seq, w.seq))
			}
		}
		for name := range want {
			if !seen[name] {
				problems = append(problems, fmt.Sprintf("bucket %q: missing", name))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: copy: verify: %w", err)
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("store: copy: verify: the destination differs from the source: %s", strings.Join(problems, "; "))
	}
	return nil
}
