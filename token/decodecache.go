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
// Every authentication reads its user's tokens and writes one back; JSON
// decoding was the largest cost of both. Each Service has its own cache
// (built by New), so two Servers in one process share no state.
type decodeCache struct {
	mu sync.Mutex
	m  map[string]decodedEntry
}

// decodeCacheSize bounds the entries (a few KiB each).
const decodeCacheSize = 8192

type decodedEntry struct {
	raw []byte
	t   *Token
}

func newDecodeCache() *decodeCache { return &decodeCache{m: map[string]decodedEntry{}} }

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

// put remembers t as the decoding of raw (both are copied).
func (c *decodeCache) put(serial string, raw []byte, t *Token) {
	if c == nil {
		return
	}
	e := decodedEntry{raw: bytes.Clone(raw), t: t.Clone()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[serial]; !ok && len(c.m) >= decodeCacheSize {
		for k := range c.m { // drop an arbitrary entry
			delete(c.m, k)
			break
		}
	}
	c.m[serial] = e
}

// forget drops serial (a deleted token).
func (c *decodeCache) forget(serial string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, serial)
	c.mu.Unlock()
}

// len counts the entries (for tests).
func (c *decodeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
