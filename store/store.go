// Package store defines the key/value store every subsystem persists
// through. It is shaped after bbolt: read and write transactions over named
// buckets of ordered byte keys.
//
// Rules every caller follows:
//
//   - The function passed to Update may run more than once (backends group
//     concurrent writers into one commit and re-run the others when one of
//     them fails, and a networked backend retries on conflict). It must
//     compute everything from the transaction and have no side effects
//     outside it: no mail, no HTTP, no channel sends. Decide, write, commit;
//     then act.
//   - Slices returned by Get and by iteration are valid only inside the
//     transaction. Decode or copy them before the function returns.
//   - Each subsystem owns its buckets; no package reads another's.
//   - Put copies its key and value: callers may reuse their buffers.
//   - Inside Update, a ForEach callback may write to the bucket it walks.
//   - A panic inside a transaction function becomes that call's error; the
//     store keeps working.
//   - DeleteBucket also resets the bucket's sequence.
//   - Calling View, Update or Close from inside a transaction function
//     deadlocks.
//
// Package store imports nothing of authsrv; only store/bolt imports bbolt.
package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Errors returned by every backend.
var (
	// ErrNotFound is returned by GetJSON for a missing key. Subsystems
	// translate it at their boundary.
	ErrNotFound = errors.New("store: not found")
	// ErrReadOnly is returned when a View transaction tries to write.
	ErrReadOnly = errors.New("store: read-only transaction")
	// ErrLocked is returned by Open when another process holds the data.
	ErrLocked = errors.New("store: data is in use by another process")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("store: closed")
	// ErrStop ends an iteration early without an error.
	ErrStop = errors.New("store: stop iteration")
)

// Store is the persistence contract. Implementations are safe for
// concurrent use.
type Store interface {
	// View runs fn in a read-only transaction that sees one consistent
	// snapshot.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a read-write transaction and commits it durably
	// before returning nil. fn may run more than once (see the package
	// comment); only the last run's writes are committed. When fn returns
	// an error nothing it wrote is kept and that error is returned.
	Update(ctx context.Context, fn func(Tx) error) error
	// Close releases the store. It is safe to call more than once.
	Close() error
}

// Snapshotter is implemented by stores that can write a consistent copy of
// all their data while serving (hot backup).
type Snapshotter interface {
	// Snapshot writes a complete, consistent copy of the store to w and
	// returns the number of bytes written.
	Snapshot(ctx context.Context, w io.Writer) (int64, error)
}

// Tx is a transaction.
type Tx interface {
	// Bucket returns the named bucket. In a read transaction a bucket that
	// does not exist behaves as an empty one; in a write transaction it is
	// created on first write.
	Bucket(name string) Bucket
	// DeleteBucket removes a bucket and all its keys. Deleting a bucket
	// that does not exist is not an error.
	DeleteBucket(name string) error
	// Writable reports whether this is an Update transaction.
	Writable() bool
}

// PreCommitter is implemented by the write transactions of backends that
// can run work once per commit, after every function that shares the
// commit has run (store/bolt groups concurrent Update calls into one
// commit). A subsystem that keeps a summary of its writes (the audit log's
// signed head) writes it once per commit instead of once per function.
// Callers type-assert the Tx and fall back to writing in each function
// when it is not a PreCommitter.
type PreCommitter interface {
	// PreCommit returns the value kept under key in this run of the
	// transaction. The first call for key calls start, keeps the value it
	// returns and registers its hook, which runs once after the last
	// function of the commit, in the same transaction, before it commits.
	// Values and hooks belong to one run: when the transaction rolls back
	// (a function failed and the others run again) they are dropped with
	// it. A hook's error fails the commit as if the function that
	// registered it had failed. Hooks must not call PreCommit.
	PreCommit(key any, start func() (value any, hook func(Tx) error)) any
}

// Pinger is implemented by stores on a database server (store/postgres),
// so that readiness can tell a database that does not answer from other
// faults. An embedded store (store/bolt) has nothing to ping.
type Pinger interface {
	// Ping checks within ctx that the database answers.
	Ping(ctx context.Context) error
}

// BucketLister is implemented by the transactions of backends that can
// name their buckets, for tools that handle a whole store without knowing
// its subsystems (Copy).
type BucketLister interface {
	// BucketNames returns, in byte order, the names of the buckets that
	// exist: those holding a key or a sequence above 0, and on backends
	// that keep empty buckets (store/bolt) those too.
	BucketNames() ([]string, error)
}

// SequenceSetter is implemented by the buckets of backends whose sequence
// can be set, so that a copied store hands out the numbers the original
// would have (Copy). Only in write transactions.
type SequenceSetter interface {
	// SetSequence sets the bucket's sequence to n: the next NextSequence
	// returns n+1.
	SetSequence(n uint64) error
}

// Bucket is an ordered set of keys.
type Bucket interface {
	// Get returns the value for key, or nil when it is missing.
	Get(key []byte) []byte
	// Put sets key to value. Empty keys are refused.
	Put(key, value []byte) error
	// Delete removes key; a missing key is not an error.
	Delete(key []byte) error
	// ForEach calls fn for every key that starts with prefix, in key order.
	// An empty prefix visits the whole bucket. fn returning ErrStop ends
	// the walk with a nil result; any other error is returned.
	ForEach(prefix []byte, fn func(k, v []byte) error) error
	// Cursor returns a cursor for ordered and reverse walks.
	Cursor() Cursor
	// NextSequence returns the next integer of the bucket's sequence,
	// starting at 1. Only in write transactions.
	NextSequence() (uint64, error)
	// Sequence returns the current sequence value without changing it.
	Sequence() uint64
}

// Cursor walks a bucket's keys in order. Each move returns the key and
// value it lands on, or a nil key past either end.
type Cursor interface {
	First() (k, v []byte)
	Last() (k, v []byte)
	// Seek moves to key, or to the next key after it when it is missing.
	Seek(key []byte) (k, v []byte)
	Next() (k, v []byte)
	Prev() (k, v []byte)
}

// HasPrefix is a small helper for cursor loops.
func HasPrefix(k, prefix []byte) bool { return k != nil && bytes.HasPrefix(k, prefix) }

// Versioned is embedded by stored records: every JSON record carries its
// schema version so that later releases can migrate it.
type Versioned struct {
	Schema int `json:"schema"`
}

// GetJSON decodes the JSON value under key into v. It returns ErrNotFound
// when the key is missing.
func GetJSON(b Bucket, key []byte, v any) error {
	raw := b.Get(key)
	if raw == nil {
		return ErrNotFound
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("store: decode %q: %w", key, err)
	}
	return nil
}

// PutJSON encodes v as JSON and stores it under key.
func PutJSON(b Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %q: %w", key, err)
	}
	return b.Put(key, raw)
}

// Uint64Key encodes n big-endian so that keys sort numerically.
func Uint64Key(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

// KeyUint64 decodes a key made by Uint64Key; it returns 0 for other keys.
func KeyUint64(k []byte) uint64 {
	if len(k) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k)
}

// MetaBucket holds store-wide bookkeeping such as the config revision. It
// belongs to this package.
const MetaBucket = "meta"

var configRevisionKey = []byte("config_revision")

// ConfigRevision returns the configuration revision: a number that every
// configuration write raises, so that caches of compiled configuration on
// every node can tell when they are stale. A new store is at revision 0.
func ConfigRevision(tx Tx) uint64 {
	return KeyUint64(tx.Bucket(MetaBucket).Get(configRevisionKey))
}

// BumpConfigRevision raises the configuration revision by one inside a
// write transaction and returns the new value. Every configuration write
// calls it in the same transaction as the change.
func BumpConfigRevision(tx Tx) (uint64, error) {
	if !tx.Writable() {
		return 0, ErrReadOnly
	}
	n := ConfigRevision(tx) + 1
	if err := tx.Bucket(MetaBucket).Put(configRevisionKey, Uint64Key(n)); err != nil {
		return 0, err
	}
	return n, nil
}

// DeleteWhere deletes the keys under prefix for which drop returns true
// (drop sees each key and value) and returns how many it deleted. The keys
// are collected first and deleted after the walk.
func DeleteWhere(b Bucket, prefix []byte, drop func(k, v []byte) bool) (int, error) {
	var keys [][]byte
	if err := b.ForEach(prefix, func(k, v []byte) error {
		if drop(k, v) {
			keys = append(keys, append([]byte(nil), k...))
		}
		return nil
	}); err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// RunAlso runs, in tx, the hooks a write method was handed: the writes
// that must commit together with its own (an operation's audit entry).
// It stops at the first error, which rolls the transaction back.
func RunAlso(tx Tx, also []func(Tx) error) error {
	for _, f := range also {
		if f == nil {
			continue
		}
		if err := f(tx); err != nil {
			return err
		}
	}
	return nil
}
