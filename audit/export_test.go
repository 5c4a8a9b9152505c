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
// left as it was. The result is in raw's encoding.
func Rehash(raw []byte) []byte {
	var rec record
	if err := decodeRecord(raw, &rec, decodeAll); err != nil {
		panic(err)
	}
	rec.Hash = hashEntry(rec.Prev, rec.Entry)
	if raw[0] == '{' {
		out, err := json.Marshal(rec)
		if err != nil {
			panic(err)
		}
		return out
	}
	return appendRecord(nil, &rec)
}

// StoredHash returns the hash stored in the entry raw.
func StoredHash(raw []byte) []byte {
	var rec record
	if err := decodeRecord(raw, &rec, decodeAll); err != nil {
		panic(err)
	}
	return rec.Hash
}

// RecordJSON returns the stored entry raw (either encoding) as the JSON
// record entries were stored as before the compact encoding.
func RecordJSON(raw []byte) []byte {
	var rec record
	if err := decodeRecord(raw, &rec, decodeAll); err != nil {
		panic(err)
	}
	out, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	return out
}

// CompactRecord returns the JSON record raw in the compact encoding.
func CompactRecord(raw []byte) ([]byte, error) {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	return appendRecord(nil, &rec), nil
}

// FormatDuration is how Row shows a duration.
var FormatDuration = formatDuration

// MatchFilter reports whether value matches the filter pattern.
func MatchFilter(pattern, value string) bool {
	return filter{parts: strings.Split(strings.ToLower(pattern), "*")}.match(value)
}
