package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"time"

	"github.com/authsrv/authsrv/store"
)

// Buckets and keys, for tests that tamper with the raw log.
const (
	EntryBucket      = entryBucket
	CheckpointBucket = checkpointBucket
	MetaBucket       = metaBucket
	SealBucket       = sealBucket
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

// SignedSeal returns a seal of entries first..number as the log stores
// it, signed with key, with the digest of the one hash h (a commit of one
// entry).
func SignedSeal(key ed25519.PrivateKey, first, number uint64, h []byte, at time.Time) []byte {
	l := &Log{cfg: Config{Key: key}}
	d := sha256.Sum256(h)
	raw, err := json.Marshal(l.sign(checkpoint{Number: number, Hash: h, Time: at.UTC(), Kind: sealKind, First: first, Digest: d[:]}))
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

// MakeLegacy rewrites the log in st as logs were before seals: every entry
// carries the Ed25519 signature of its content (in the encoding it had),
// there are no seals, and the head is a checkpoint of kind "head".
func MakeLegacy(st store.Store, key ed25519.PrivateKey, at time.Time) error {
	l := &Log{cfg: Config{Key: key}}
	return st.Update(context.Background(), func(tx store.Tx) error {
		b := tx.Bucket(entryBucket)
		var last record
		var lastNum uint64
		err := b.ForEach(nil, func(k, v []byte) error {
			var rec record
			if err := decodeRecord(v, &rec, decodeAll); err != nil {
				return err
			}
			rec.Sig = ed25519.Sign(key, contentHash(rec.Entry))
			out := appendRecord(nil, &rec)
			if v[0] == '{' {
				var err error
				if out, err = json.Marshal(rec); err != nil {
					return err
				}
			}
			last, lastNum = rec, store.KeyUint64(k)
			return b.Put(append([]byte(nil), k...), out)
		})
		if err != nil {
			return err
		}
		if err := tx.DeleteBucket(sealBucket); err != nil {
			return err
		}
		return store.PutJSON(tx.Bucket(metaBucket), headKey, l.sign(checkpoint{Number: lastNum, Hash: last.Hash, Time: at.UTC(), Kind: "head"}))
	})
}
