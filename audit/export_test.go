package audit

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"time"
)

// Buckets and keys, for tests that tamper with the raw log.
const (
	EntryBucket      = entryBucket
	CheckpointBucket = checkpointBucket
	MetaBucket       = metaBucket
)

var (
	HeadKey = headKey
	BaseKey = baseKey
)

// SignedCheckpoint returns a checkpoint as the log stores it, signed with
// key (which may be another log's, to forge one).
func SignedCheckpoint(key ed25519.PrivateKey, kind string, number uint64, hash []byte, at time.Time) []byte {
	l := &Log{cfg: Config{Key: key}}
	raw, err := json.Marshal(l.sign(checkpoint{Number: number, Hash: hash, Time: at.UTC(), Kind: kind}))
	if err != nil {
		panic(err)
	}
	return raw
}

// Rehash returns the stored entry raw with its hash recomputed from its
// columns and prev, as a forger without the key could; the signature is
// left as it was.
func Rehash(raw []byte) []byte {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		panic(err)
	}
	rec.Hash = hashEntry(rec.Prev, rec.Entry)
	out, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	return out
}

// StoredHash returns the hash stored in the entry raw.
func StoredHash(raw []byte) []byte {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		panic(err)
	}
	return rec.Hash
}

// FormatDuration is how Row shows a duration.
var FormatDuration = formatDuration

// MatchFilter reports whether value matches the filter pattern.
func MatchFilter(pattern, value string) bool {
	return filter{parts: strings.Split(strings.ToLower(pattern), "*")}.match(value)
}
