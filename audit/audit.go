// Package audit owns the audit log: one entry per API request with
// privacyIDEA's columns, chained by hashes and sealed with Ed25519 once per
// commit, so that edited, deleted and truncated entries are detected;
// signed checkpoints; queries for the /audit/ API; retention.
//
// Every commit that appends entries leaves one signed seal: the numbers of
// its first and last entry, the last one's chain hash, and a digest of the
// hashes of all of them. An entry is authentic when its columns hash to its
// stored hash and the seal of its commit verifies over the stored hashes of
// that commit's entries; an edit of one entry fails that entry alone, a
// forger's rehash fails its commit's seal. Entries written before seals
// existed carry an Ed25519 signature of their own, which still verifies.
//
// Package audit sits on floor 2: it imports store, apierr and
// internal/secret, and never sees HTTP.
package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/authsrv/authsrv/store"
)

// Buckets of the package.
const (
	entryBucket      = "audit"             // number -> entry
	checkpointBucket = "audit_checkpoints" // number -> checkpoint
	metaBucket       = "audit_meta"        // head, base
	sealBucket       = "audit_seals"       // number of a commit's last entry -> its seal
)

var (
	headKey = []byte("head")
	baseKey = []byte("base")
)

const schema = 1

// DefaultCheckpointEvery is how many entries lie between two signed
// checkpoints.
const DefaultCheckpointEvery = 1000

// Entry is one audit entry. The columns are privacyIDEA's.
type Entry struct {
	Number           uint64    `json:"number"`
	Date             time.Time `json:"date"`
	StartDate        time.Time `json:"startdate"`
	Duration         float64   `json:"duration"` // seconds
	Action           string    `json:"action"`
	Success          bool      `json:"success"`
	Authentication   string    `json:"authentication,omitempty"`
	Serial           string    `json:"serial,omitempty"`
	TokenType        string    `json:"token_type,omitempty"`
	User             string    `json:"user,omitempty"`
	Realm            string    `json:"realm,omitempty"`
	Resolver         string    `json:"resolver,omitempty"`
	Administrator    string    `json:"administrator,omitempty"`
	ActionDetail     string    `json:"action_detail,omitempty"`
	Info             string    `json:"info,omitempty"`
	Node             string    `json:"privacyidea_server,omitempty"`
	Client           string    `json:"client,omitempty"`
	UserAgent        string    `json:"user_agent,omitempty"`
	UserAgentVersion string    `json:"user_agent_version,omitempty"`
	Policies         string    `json:"policies,omitempty"`
	ThreadID         string    `json:"thread_id,omitempty"`
}

// record is an entry as stored: the entry, the hash of the entry before
// it and its own hash. Sig, the Ed25519 signature of the entry's content,
// is set only on entries written before seals existed; the others are
// covered by the seal of their commit.
type record struct {
	Schema int    `json:"schema"`
	Entry  Entry  `json:"entry"`
	Prev   []byte `json:"prev"`
	Hash   []byte `json:"hash"`
	Sig    []byte `json:"sig"`
}

// checkpoint is a signed statement: entry Number had hash Hash. A seal
// (kind "seal") is a commit's: it also names the commit's first entry and
// the digest of the hashes of First..Number; the head is the last seal
// (older logs: kind "head", without First and Digest). Numbered
// checkpoints stay; the base checkpoint says where the log starts after
// retention removed older entries (Number is the first kept entry, Hash
// the hash before it).
type checkpoint struct {
	Number uint64    `json:"number"`
	Hash   []byte    `json:"hash"`
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	First  uint64    `json:"first,omitempty"`
	Digest []byte    `json:"digest,omitempty"`
	Sig    []byte    `json:"sig"`
}

func (c checkpoint) message() []byte {
	b := []byte("authsrv-audit-checkpoint\x00" + c.Kind + "\x00")
	b = binary.BigEndian.AppendUint64(b, c.Number)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Time.UnixNano()))
	b = append(b, c.Hash...)
	if c.Kind == sealKind {
		b = binary.BigEndian.AppendUint64(b, c.First)
		b = append(b, c.Digest...)
	}
	return b
}

// sealKind is the kind of a commit's seal.
const sealKind = "seal"

// sealDigest accumulates the digest a seal signs: SHA-256 over the
// commit's entry hashes in order.
type sealDigest struct {
	first uint64
	h     hash.Hash
}

func (d *sealDigest) add(num uint64, entryHash []byte) {
	if d.h == nil {
		d.first, d.h = num, sha256.New()
	}
	d.h.Write(entryHash)
}

// contentHash is what the Ed25519 signature of an entry written before
// seals existed covers: the hash of its columns without the number and the
// chain.
func contentHash(e Entry) []byte {
	e.Number = 0
	return hashEntry([]byte("content"), e)
}

// hashEntry is the chain hash of e after prev: SHA-256 over a canonical,
// length-prefixed encoding of every column. It is built in one buffer (on
// the stack for usual entries) and hashed at once.
func hashEntry(prev []byte, e Entry) []byte {
	var stack [1024]byte
	var num [40]byte
	b := append(stack[:0], "authsrv-audit-entry\x00"...)
	b = append(b, prev...)
	b = appendField(b, strconv.AppendUint(num[:0], e.Number, 10))
	b = appendField(b, e.Date.UTC().AppendFormat(num[:0], time.RFC3339Nano))
	b = appendField(b, e.StartDate.UTC().AppendFormat(num[:0], time.RFC3339Nano))
	b = appendField(b, strconv.AppendFloat(num[:0], e.Duration, 'g', -1, 64))
	b = appendField(b, e.Action)
	b = appendField(b, strconv.AppendBool(num[:0], e.Success))
	for _, s := range [...]string{e.Authentication, e.Serial, e.TokenType, e.User, e.Realm, e.Resolver,
		e.Administrator, e.ActionDetail, e.Info, e.Node, e.Client, e.UserAgent, e.UserAgentVersion,
		e.Policies, e.ThreadID} {
		b = appendField(b, s)
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// appendField appends s with its length as 8 bytes big-endian.
func appendField[T string | []byte](b []byte, s T) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// Config wires the log.
type Config struct {
	Store store.Store
	// Key signs entries and checkpoints.
	Key ed25519.PrivateKey
	Now func() time.Time
	// CheckpointEvery is the distance of numbered checkpoints (default
	// DefaultCheckpointEvery).
	CheckpointEvery uint64
	// MaxAge and MaxEntries bound retention (0: unlimited).
	MaxAge     time.Duration
	MaxEntries uint64
}

// Log is the audit log.
type Log struct {
	cfg Config
	pub ed25519.PublicKey

	mu    sync.Mutex
	queue []*pending
	busy  bool

	// unwritten counts the entries Write could not commit.
	unwritten atomic.Uint64
}

// Unwritten returns how many entries Write could not commit since the log
// was opened (the store refused them: a full disk). The operations that
// still answered without their entry are reads and refusals, which change
// nothing; a change is never answered without its entry.
func (l *Log) Unwritten() uint64 { return l.unwritten.Load() }

// New returns the log.
func New(cfg Config) (*Log, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("audit: signing key must be an Ed25519 private key")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = DefaultCheckpointEvery
	}
	return &Log{cfg: cfg, pub: cfg.Key.Public().(ed25519.PublicKey)}, nil
}

// PublicKey verifies the log's signatures.
func (l *Log) PublicKey() ed25519.PublicKey { return l.pub }

func (l *Log) sign(c checkpoint) checkpoint {
	c.Sig = ed25519.Sign(l.cfg.Key, c.message())
	return c
}

// Write appends e durably: when Write returns nil the entry is committed
// (the caller answers its client only then). Concurrent writers are
// appended in one batch, whose leader writes them in one store transaction
// sealed once. The number is assigned here; the written entry is returned.
func (l *Log) Write(ctx context.Context, e Entry) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return e, err
	}
	e = canonical(e)
	p := &pending{e: e, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	l.mu.Lock()
	l.queue = append(l.queue, p)
	if l.busy {
		l.mu.Unlock()
		select {
		case <-p.done:
			return p.res, p.err
		case <-p.lead:
		}
	} else {
		l.busy = true
		l.mu.Unlock()
	}
	l.leadBatch()
	<-p.done
	return p.res, p.err
}

// pending is one Write waiting for its batch.
type pending struct {
	e    Entry
	res  Entry
	err  error
	done chan struct{}
	lead chan struct{}
}

// maxBatch bounds the entries of one batch.
const maxBatch = 512

// leadBatch commits the queued entries (the leader's own among them) and
// hands leadership to the next waiter, if any.
func (l *Log) leadBatch() {
	l.mu.Lock()
	n := min(len(l.queue), maxBatch)
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	l.mu.Unlock()

	var out []Entry
	err := l.cfg.Store.Update(context.Background(), func(tx store.Tx) error {
		out = out[:0]
		for _, p := range batch {
			e, err := l.WritePrepared(tx, Prepared{e: p.e})
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		l.unwritten.Add(uint64(len(batch)))
	}
	for i, p := range batch {
		p.err = err
		if err == nil {
			p.res = out[i]
		}
		close(p.done)
	}
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.busy = false
		l.mu.Unlock()
		return
	}
	next := l.queue[0]
	l.mu.Unlock()
	next.lead <- struct{}{}
}

// WriteTx appends e inside the caller's write transaction, so that the
// entry commits together with the change it describes.
func (l *Log) WriteTx(tx store.Tx, e Entry) (Entry, error) {
	return l.WritePrepared(tx, l.Prepare(e))
}

// Prepared is an entry made ready before the transaction it will be
// written in (a write transaction is the store's serial section).
type Prepared struct {
	e Entry
}

// Prepare makes e canonical.
func (l *Log) Prepare(e Entry) Prepared {
	return Prepared{e: canonical(e)}
}

// WritePrepared appends p inside the caller's write transaction (number,
// chain hash and the seal), so that the entry commits together with the
// change it describes. When the store groups several writers into one
// commit (store.PreCommitter), the seal is signed and written once, before
// that commit, for all their entries.
func (l *Log) WritePrepared(tx store.Tx, p Prepared) (Entry, error) {
	t, once, err := l.tip(tx)
	if err != nil {
		return p.e, err
	}
	e, h, err := l.appendOne(tx, p.e, t.hash)
	if err != nil {
		return e, err
	}
	t.num, t.hash, t.dirty = e.Number, h, true
	t.dig.add(e.Number, h)
	if once {
		return e, nil
	}
	return e, l.writeSeal(tx, t, true)
}

// chainKey is the store.PreCommitter key of the chain's tip: one audit log
// per store.
type chainKey struct{}

// chainTip is the end of the chain as a write transaction sees it: the
// number and hash of the last entry. dirty is set once an entry was
// appended after it was read; dig holds the hashes appended since the
// last seal.
type chainTip struct {
	num    uint64
	hash   []byte
	loaded bool
	dirty  bool
	dig    sealDigest
}

// tip returns the chain's end in tx. With a store.PreCommitter the tip is
// kept for the whole commit (once is true) and a hook writes the seal once
// before it commits; the tip is read again when the entry bucket's
// sequence shows that someone appended without it (its entries before
// that are sealed first).
func (l *Log) tip(tx store.Tx) (t *chainTip, once bool, err error) {
	pc, once := tx.(store.PreCommitter)
	if once {
		t = pc.PreCommit(chainKey{}, func() (any, func(store.Tx) error) {
			t := &chainTip{}
			return t, func(tx store.Tx) error { return l.flushHead(tx, t) }
		}).(*chainTip)
	} else {
		t = &chainTip{}
	}
	if t.loaded && t.num == tx.Bucket(entryBucket).Sequence() {
		return t, once, nil
	}
	if t.dig.h != nil {
		if err := l.writeSeal(tx, t, false); err != nil {
			return t, once, err
		}
	}
	num, hash, err := l.readTip(tx)
	if err != nil {
		return t, once, err
	}
	t.num, t.hash, t.loaded = num, hash, true
	return t, once, nil
}

// flushHead is the hook of a commit that appended entries: it signs and
// writes their seal, which is also the head. When a writer without the
// hook appended after them, that writer wrote the head itself.
func (l *Log) flushHead(tx store.Tx, t *chainTip) error {
	if !t.dirty || t.dig.h == nil {
		return nil
	}
	return l.writeSeal(tx, t, t.num == tx.Bucket(entryBucket).Sequence())
}

// readTip reads the number and hash of the last entry from the store: the
// head names it when it is current; else the last entry itself, or the
// base checkpoint when retention removed every entry.
func (l *Log) readTip(tx store.Tx) (uint64, []byte, error) {
	seq := tx.Bucket(entryBucket).Sequence()
	meta := tx.Bucket(metaBucket)
	var head *checkpoint
	if raw := meta.Get(headKey); raw != nil {
		head = new(checkpoint)
		if err := json.Unmarshal(raw, head); err != nil {
			return 0, nil, fmt.Errorf("audit head: %w", err)
		}
		if head.Number == seq {
			return seq, head.Hash, nil
		}
	}
	if seq == 0 {
		return 0, nil, nil
	}
	if raw := tx.Bucket(entryBucket).Get(store.Uint64Key(seq)); raw != nil {
		var rec record
		if err := decodeRecord(raw, &rec, decodeAll); err != nil {
			return 0, nil, fmt.Errorf("audit entry %d: %w", seq, err)
		}
		return seq, rec.Hash, nil
	}
	if raw := meta.Get(baseKey); raw != nil {
		var base checkpoint
		if err := json.Unmarshal(raw, &base); err != nil {
			return 0, nil, fmt.Errorf("audit base: %w", err)
		}
		if base.Number == seq+1 {
			return seq, base.Hash, nil
		}
	}
	if head != nil {
		return seq, head.Hash, nil
	}
	return seq, nil, nil
}

// writeSeal signs and stores the seal of the entries t appended since its
// last seal, and with head also as the head (t names the last entry).
func (l *Log) writeSeal(tx store.Tx, t *chainTip, head bool) error {
	c := l.sign(checkpoint{Number: t.num, Hash: t.hash, Time: l.cfg.Now().UTC(), Kind: sealKind,
		First: t.dig.first, Digest: t.dig.h.Sum(nil)})
	t.dig = sealDigest{}
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := tx.Bucket(sealBucket).Put(store.Uint64Key(c.Number), raw); err != nil {
		return err
	}
	if !head {
		return nil
	}
	return tx.Bucket(metaBucket).Put(headKey, raw)
}

// appendOne stores e (already canonical) chained after prev and returns it
// with its chain hash. Every CheckpointEvery entries a signed checkpoint
// is kept.
func (l *Log) appendOne(tx store.Tx, e Entry, prev []byte) (Entry, []byte, error) {
	b := tx.Bucket(entryBucket)
	n, err := b.NextSequence()
	if err != nil {
		return e, nil, err
	}
	e.Number = n
	rec := record{Schema: schema, Entry: e, Prev: prev}
	rec.Hash = hashEntry(prev, e)
	// Put copies the value: the encoding's buffer is reused.
	buf := recordBufs.Get().(*[]byte)
	*buf = appendRecord((*buf)[:0], &rec)
	err = b.Put(store.Uint64Key(n), *buf)
	if cap(*buf) <= 4096 {
		recordBufs.Put(buf)
	}
	if err != nil {
		return e, nil, err
	}
	if n%l.cfg.CheckpointEvery == 0 {
		cp := l.sign(checkpoint{Number: n, Hash: rec.Hash, Time: l.cfg.Now().UTC(), Kind: "checkpoint"})
		if err := store.PutJSON(tx.Bucket(checkpointBucket), store.Uint64Key(n), cp); err != nil {
			return e, nil, err
		}
	}
	return e, rec.Hash, nil
}

// recordBufs are the buffers appendOne encodes entries in.
var recordBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// canonical returns e as it reads back from the store, so that the hash
// computed at write time is the one Verify recomputes: times in UTC
// without a monotonic reading, and strings in valid UTF-8 with each
// invalid byte replaced by U+FFFD, as encoding/json writes them (entries
// were JSON before the compact encoding, which keeps the rule; a client's
// User-Agent may hold any bytes).
func canonical(e Entry) Entry {
	e.Date, e.StartDate = e.Date.UTC(), e.StartDate.UTC()
	for _, s := range []*string{&e.Action, &e.Authentication, &e.Serial, &e.TokenType, &e.User, &e.Realm,
		&e.Resolver, &e.Administrator, &e.ActionDetail, &e.Info, &e.Node, &e.Client, &e.UserAgent,
		&e.UserAgentVersion, &e.Policies, &e.ThreadID} {
		*s = validUTF8(*s)
	}
	return e
}

// validUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD, byte by byte as encoding/json does (strings.ToValidUTF8 would
// replace a whole run with one).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// retainSlice is how many entries one retention transaction removes at
// most.
const retainSlice = 1000

// Retain removes entries older than MaxAge and beyond MaxEntries, and
// moves the signed base checkpoint to the first kept entry so that the
// chain still verifies. It returns how many entries were removed.
func (l *Log) Retain(ctx context.Context) (int, error) {
	if l.cfg.MaxAge <= 0 && l.cfg.MaxEntries == 0 {
		return 0, nil
	}
	removed := 0
	// Remove in slices so one transaction stays small.
	for {
		n := 0
		err := l.cfg.Store.Update(ctx, func(tx store.Tx) error {
			n = 0
			b := tx.Bucket(entryBucket)
			c := b.Cursor()
			last, _ := c.Last()
			lastN := store.KeyUint64(last)
			cutoff := l.cfg.Now().Add(-l.cfg.MaxAge)
			var keys [][]byte
			k, v := c.First()
			for ; k != nil && len(keys) < retainSlice; k, v = c.Next() {
				var rec record
				if err := decodeRecord(v, &rec, decodeDate); err != nil {
					return fmt.Errorf("audit entry %d: %w", store.KeyUint64(k), err)
				}
				old := l.cfg.MaxAge > 0 && rec.Entry.Date.Before(cutoff)
				many := l.cfg.MaxEntries > 0 && lastN-store.KeyUint64(k) >= l.cfg.MaxEntries
				if !old && !many {
					break
				}
				keys = append(keys, append([]byte(nil), k...))
			}
			if len(keys) == 0 {
				return nil
			}
			// k is the first entry after this slice: the first one kept, or
			// the next slice's first when the slice filled up (nil when
			// none is left). The base must name it either way.
			var firstKept []byte
			if k != nil {
				firstKept = append([]byte(nil), k...)
			}
			// The base names the first entry kept and the hash it chains to.
			var base checkpoint
			if firstKept != nil {
				var rec record
				if err := decodeRecord(b.Get(firstKept), &rec, decodeAll); err != nil {
					return fmt.Errorf("audit entry %d: %w", store.KeyUint64(firstKept), err)
				}
				base = checkpoint{Number: store.KeyUint64(firstKept), Hash: rec.Prev}
			} else {
				base = checkpoint{Number: lastN + 1}
				var rec record
				if err := decodeRecord(b.Get(last), &rec, decodeAll); err != nil {
					return fmt.Errorf("audit entry %d: %w", lastN, err)
				}
				base.Hash = rec.Hash
			}
			base.Kind, base.Time = "base", l.cfg.Now().UTC()
			if err := l.resealCut(tx, base.Number); err != nil {
				return err
			}
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			cps := tx.Bucket(checkpointBucket)
			var stale [][]byte
			_ = cps.ForEach(nil, func(k, _ []byte) error {
				if store.KeyUint64(k) < base.Number {
					stale = append(stale, append([]byte(nil), k...))
				}
				return nil
			})
			for _, k := range stale {
				if err := cps.Delete(k); err != nil {
					return err
				}
			}
			if err := deleteBelow(tx.Bucket(sealBucket), base.Number); err != nil {
				return err
			}
			n = len(keys)
			return store.PutJSON(tx.Bucket(metaBucket), baseKey, l.sign(base))
		})
		if err != nil {
			return removed, err
		}
		removed += n
		if n < retainSlice {
			return removed, nil
		}
	}
}

// resealCut runs in the retention transaction that removes the entries
// before first (still present in it). When they and the entries from
// first on were sealed by one commit, that seal would cover removed
// entries: it is replaced by one over the kept entries alone, signed only
// when the old seal verifies over all of them, so that retention never
// launders an entry edited before it.
func (l *Log) resealCut(tx store.Tx, first uint64) error {
	seals := tx.Bucket(sealBucket)
	k, raw := seals.Cursor().Seek(store.Uint64Key(first))
	if k == nil {
		return nil
	}
	entries := tx.Bucket(entryBucket)
	c, ok := checkSeal(l.pub, entries, store.KeyUint64(k), raw)
	if !ok || c.First >= first {
		return nil
	}
	kept, ok := sealDigestOf(entries, first, c.Number)
	if !ok {
		return nil
	}
	c = l.sign(checkpoint{Number: c.Number, Hash: c.Hash, Time: l.cfg.Now().UTC(), Kind: sealKind, First: first, Digest: kept})
	out, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := seals.Put(store.Uint64Key(c.Number), out); err != nil {
		return err
	}
	meta := tx.Bucket(metaBucket)
	var head checkpoint
	if json.Unmarshal(meta.Get(headKey), &head) == nil && head.Kind == sealKind && head.Number == c.Number {
		return meta.Put(headKey, out)
	}
	return nil
}

// checkSeal decodes the seal raw stored under at and reports whether it is
// a seal signed by pub over the stored hashes of the entries it names.
func checkSeal(pub ed25519.PublicKey, entries store.Bucket, at uint64, raw []byte) (checkpoint, bool) {
	var c checkpoint
	if json.Unmarshal(raw, &c) != nil || c.Kind != sealKind || c.Number != at || c.First == 0 || c.First > at ||
		!ed25519.Verify(pub, c.message(), c.Sig) {
		return c, false
	}
	d, ok := sealDigestOf(entries, c.First, c.Number)
	return c, ok && bytes.Equal(d, c.Digest)
}

// sealDigestOf is the digest a seal of entries from..to signs: SHA-256
// over their stored hashes in order; false when one is missing or does
// not decode.
func sealDigestOf(entries store.Bucket, from, to uint64) ([]byte, bool) {
	h := sha256.New()
	for n := from; n <= to; n++ {
		var rec record
		if decodeRecord(entries.Get(store.Uint64Key(n)), &rec, decodeAll) != nil {
			return nil, false
		}
		h.Write(rec.Hash)
	}
	return h.Sum(nil), true
}

// deleteBelow removes the keys of b below number n.
func deleteBelow(b store.Bucket, n uint64) error {
	var stale [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && store.KeyUint64(k) < n; k, _ = c.Next() {
		stale = append(stale, append([]byte(nil), k...))
	}
	for _, k := range stale {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// LoadOrCreateKey reads the Ed25519 signing key kept in path (its 32-byte
// seed), or creates it with mode 0400.
func LoadOrCreateKey(path string, rnd io.Reader) (ed25519.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		if len(raw) != ed25519.SeedSize {
			return nil, fmt.Errorf("audit key %s: want %d bytes, got %d", path, ed25519.SeedSize, len(raw))
		}
		return ed25519.NewKeyFromSeed(raw), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rnd, seed); err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	if _, err := f.Write(seed); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("audit key: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("audit key: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), f.Close()
}
