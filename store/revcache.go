package store

import "sync"

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
