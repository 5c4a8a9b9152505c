package token

import (
	"bytes"
	"sync"
)

// decoded keeps recently read or written token records decoded, keyed by
// serial and checked against the stored bytes: an entry is used only when
// the record in the store is byte for byte the one it was decoded from,
// so a stale entry (a write that was rolled back, another store in the
// same process) is never returned, only missed. Every authentication
// reads its user's tokens and writes one back; JSON decoding was the
// largest cost of both.
var decoded = decodeCache{m: map[string]decodedEntry{}}

// decodeCacheSize bounds the entries (a few KiB each).
const decodeCacheSize = 8192

type decodeCache struct {
	mu sync.Mutex
	m  map[string]decodedEntry
}

type decodedEntry struct {
	raw []byte
	t   *Token
}

// get returns a private copy of the token decoded from raw, if cached.
func (c *decodeCache) get(serial string, raw []byte) (*Token, bool) {
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
	c.mu.Lock()
	delete(c.m, serial)
	c.mu.Unlock()
}
