package store

import (
	"context"
	"sync/atomic"
	"time"
)

// RevSnapshot keeps one value compiled from configuration records (the
// active event handler definitions, the system settings) at one
// configuration revision. A change made through the owner takes effect at
// once (Changed); one made by another process sharing the store (a
// second node) within the recheck bound, after which the next Get reads
// the revision, one key, and compiles again only when it moved.
type RevSnapshot[V any] struct {
	// recheckNs bounds how long a value is used without reading the
	// revision (0: one second); SetRecheck.
	recheckNs atomic.Int64

	cur atomic.Pointer[revEntry[V]]
	// minRev is the revision of the last change made through the owner:
	// older values are stale.
	minRev atomic.Uint64
}

type revEntry[V any] struct {
	rev uint64
	v   V
	// checked is when the revision was last compared (unix ns).
	checked atomic.Int64
}

func (c *RevSnapshot[V]) recheck() int64 {
	if d := c.recheckNs.Load(); d > 0 {
		return d
	}
	return int64(time.Second)
}

// SetRecheck sets how long a value is used without reading the revision
// (default one second). Tests shorten it to see another writer's change
// at once.
func (c *RevSnapshot[V]) SetRecheck(d time.Duration) { c.recheckNs.Store(int64(d)) }

// Fresh returns the value when it is current and was compared with the
// store's revision within the recheck bound: an atomic load and a time
// check, the hot path.
func (c *RevSnapshot[V]) Fresh() (V, bool) {
	if e := c.cur.Load(); e != nil && e.rev >= c.minRev.Load() && time.Now().UnixNano()-e.checked.Load() < c.recheck() {
		return e.v, true
	}
	var zero V
	return zero, false
}

// Last returns the last value compiled, stale or not, and marks it
// checked now (a caller that keeps using it after a failed Get tries
// the store again only after the recheck bound).
func (c *RevSnapshot[V]) Last() (V, bool) {
	if e := c.cur.Load(); e != nil {
		e.checked.Store(time.Now().UnixNano())
		return e.v, true
	}
	var zero V
	return zero, false
}

// Get returns the value: the one held when ctx is pinned to its revision
// (WithRevision) or it was compared within the recheck bound; else the
// revision is read and, when it moved, compile runs in a read
// transaction of st and its value is kept unless a newer one is.
func (c *RevSnapshot[V]) Get(ctx context.Context, st Store, compile func(tx Tx) (V, error)) (V, error) {
	e := c.cur.Load()
	now := time.Now().UnixNano()
	if e != nil && e.rev < c.minRev.Load() {
		e = nil
	}
	if e != nil {
		if rev, pinned := RevisionFrom(ctx); pinned && rev == e.rev {
			return e.v, nil
		}
		if now-e.checked.Load() < c.recheck() {
			return e.v, nil
		}
		var rev uint64
		if err := st.View(ctx, func(tx Tx) error { rev = ConfigRevision(tx); return nil }); err != nil {
			var zero V
			return zero, err
		}
		if rev == e.rev {
			e.checked.Store(now)
			return e.v, nil
		}
	}
	n := &revEntry[V]{}
	n.checked.Store(now)
	err := st.View(ctx, func(tx Tx) error {
		n.rev = ConfigRevision(tx)
		var err error
		n.v, err = compile(tx)
		return err
	})
	if err != nil {
		var zero V
		return zero, err
	}
	for {
		old := c.cur.Load()
		if (old != nil && old.rev > n.rev) || n.rev < c.minRev.Load() {
			return n.v, nil
		}
		if c.cur.CompareAndSwap(old, n) {
			return n.v, nil
		}
	}
}

// Changed notes a change committed at revision rev through the owner:
// values older than it are no longer used.
func (c *RevSnapshot[V]) Changed(rev uint64) {
	for {
		old := c.minRev.Load()
		if rev <= old || c.minRev.CompareAndSwap(old, rev) {
			break
		}
	}
	if e := c.cur.Load(); e != nil && e.rev < rev {
		c.cur.CompareAndSwap(e, nil)
	}
}
