package token

import (
	"bytes"
	"sync"
)

// decodeCache keeps one Service's recently read or written token records
// decoded, keyed by serial and checked against the stored bytes: an entry
// is used only when the record in the store is byte for byte the one it was
// decoded from, so a stale entry (a write that was rolled back, a change
// made by another node on a shared store) is never returned, only missed.
// Every authentication reads its user's tokens and writes one back;
// decoding was the largest cost of both. Each Service has its own cache
// (built by New), so two Servers in one process share no state. Its size
// is bounded in bytes (Config.DecodeCacheBytes); lists, scans and the
// index rebuild read without it, so they never evict what
// authentications keep.
type decodeCache struct {
	mu    sync.Mutex
	m     map[string]decodedEntry
	bytes int64 // the estimated size of the entries
	limit int64
}

// DefaultDecodeCacheBytes is the decode cache's size when
// Config.DecodeCacheBytes is 0.
const DefaultDecodeCacheBytes = 16 << 20

type decodedEntry struct {
	raw  []byte
	t    *Token
	size int64
}

// entrySize estimates an entry's memory: the stored bytes, the decoded
// token (its maps and strings take about twice the compact record) and
// the map's overhead.
func entrySize(serial string, raw []byte) int64 {
	return int64(3*len(raw) + 2*len(serial) + 256)
}

// newDecodeCache returns a cache of at most limit bytes (0: the default;
// negative: nil, no cache).
func newDecodeCache(limit int64) *decodeCache {
	if limit < 0 {
		return nil
	}
	if limit == 0 {
		limit = DefaultDecodeCacheBytes
	}
	return &decodeCache{m: map[string]decodedEntry{}, limit: limit}
}

// get returns a private copy of the token decoded from raw, if cached.
func (c *decodeCache) get(serial string, raw []byte) (*Token, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[serial]
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return nil, false
	}
	return e.t.Clone(), true
}

// peek returns the cached decoding of raw itself, not a copy: the caller
// only reads it (and clones it before any change).
func (c *decodeCache) peek(serial string, raw []byte) (*Token, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[serial]
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return nil, false
	}
	return e.t, true
}

// put remembers t as the decoding of raw (both are copied).
func (c *decodeCache) put(serial string, raw []byte, t *Token) {
	if c == nil {
		return
	}
	c.keep(serial, bytes.Clone(raw), t.Clone())
}

// keep remembers t as the decoding of raw without copying: the caller
// hands both over and neither changes afterwards.
func (c *decodeCache) keep(serial string, raw []byte, t *Token) {
	if c == nil {
		return
	}
	e := decodedEntry{raw: raw, t: t, size: entrySize(serial, raw)}
	if e.size > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[serial]; ok {
		c.bytes -= old.size
		delete(c.m, serial)
	}
	for k, old := range c.m { // drop arbitrary entries until e fits
		if c.bytes+e.size <= c.limit {
			break
		}
		c.bytes -= old.size
		delete(c.m, k)
	}
	c.m[serial] = e
	c.bytes += e.size
}

// forget drops serial (a deleted token).
func (c *decodeCache) forget(serial string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if old, ok := c.m[serial]; ok {
		c.bytes -= old.size
		delete(c.m, serial)
	}
	c.mu.Unlock()
}

// len counts the entries (for tests).
func (c *decodeCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// size is the estimated size of the entries (for tests).
func (c *decodeCache) size() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
