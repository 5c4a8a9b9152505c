package store

import (
	"context"
	"sync"
)

// RevCache keeps values decoded from configuration records for as long as
// the configuration revision (ConfigRevision) stays the same: every
// configuration write bumps the revision in its transaction, which empties
// the cache for the readers that come after it. The hot paths (realm and
// resolver lookups of every authentication) read the revision, one key,
// instead of decoding their records again.
type RevCache[V any] struct {
	mu  sync.Mutex
	rev uint64
	m   map[string]V
}

// Get returns the value cached for key at the revision tx sees.
func (c *RevCache[V]) Get(tx Tx, key string) (V, bool) {
	rev := ConfigRevision(tx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.rev != rev {
		var zero V
		return zero, false
	}
	v, ok := c.m[key]
	return v, ok
}

// Put caches v for key as read in tx. A value read at an older revision
// than the cache holds is dropped; a newer revision starts a new cache.
func (c *RevCache[V]) Put(tx Tx, key string, v V) { c.PutAt(ConfigRevision(tx), key, v) }

// PutAt caches v for key as read at configuration revision rev.
func (c *RevCache[V]) PutAt(rev uint64, key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.m == nil || rev > c.rev:
		c.m, c.rev = map[string]V{}, rev
	case rev < c.rev:
		return
	}
	c.m[key] = v
}

// GetAt returns the value cached for key when the cache holds revision
// rev; it reads nothing from the store.
func (c *RevCache[V]) GetAt(rev uint64, key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.rev != rev {
		var zero V
		return zero, false
	}
	v, ok := c.m[key]
	return v, ok
}

type revisionKey struct{}

// WithRevision returns ctx pinned to configuration revision rev: the
// revision a request has already read (with its policies) and decides
// with. Lookups through a RevCache may then answer from values cached at
// that same revision without a store read of their own (GetAt); a cache
// that has moved on to another revision answers nothing and the lookup
// reads the store as usual.
func WithRevision(ctx context.Context, rev uint64) context.Context {
	return context.WithValue(ctx, revisionKey{}, rev)
}

// RevisionFrom returns the revision ctx is pinned to (WithRevision).
func RevisionFrom(ctx context.Context) (uint64, bool) {
	rev, ok := ctx.Value(revisionKey{}).(uint64)
	return rev, ok
}
