package token

// The list indexes: what GET /token/, the enrollment limits and getserial
// read instead of decoding every token record.
//
//   - tokens.attr: serial → the token's list attributes (attr, a compact
//     binary record of the fields that an authentication does not change:
//     id, type, description, active, rollout state, otplen, maxfail,
//     realms, owner and the tokeninfo keys). Its keys are the ordered
//     serials; its values answer every filter but infovalue without
//     decoding the JSON record.
//   - tokens.serial: the serials alone (empty values), the dense ordered
//     key set that serial wildcards and unfiltered pages walk.
//   - tokens.orealm: lower(owner realm)\0serial.
//   - tokens.col: one ordered index per sort column and flag:
//     column byte, value, \0, serial.
//   - tokens.counts: counters maintained in the same transaction as the
//     entries (all tokens, per type, token realm, owner realm, assigned,
//     active and rollout state), so counts of one filter are read, not
//     counted; and the total length of the serials, so that the list set
//     is built in memory of its final size.
//   - tokens.gen: the list generation and the log of the serials each
//     change touched, written with every change of the list attributes;
//     the in-memory list set (listset.go) follows it.
//
// The older tokens.owner, tokens.realm and tokens.type indexes stay as they
// are. A save that leaves the list attributes as they were (a counter or
// fail counter update, the write of every authentication) writes no index
// entry at all.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

const (
	bucketAttr   = "tokens.attr"
	bucketORealm = "tokens.orealm"
	bucketCol    = "tokens.col"
	bucketCounts = "tokens.counts"
	bucketSerial = "tokens.serial"

	// indexVersion is the version of the list indexes; a data file without
	// it (or with another) gets them rebuilt by BuildIndexes.
	indexVersion = 1
	// indexBatch is the number of tokens one rebuild transaction indexes.
	indexBatch = 5000
)

var (
	keyIndexVersion = []byte("\x00version")
	// keyIndexBuilding marks a running rebuild: '>' and the last serial it
	// indexed.
	keyIndexBuilding = []byte("\x00building")
)

// Column bytes of tokens.col.
const (
	colDescription = 'd'
	colActive      = 'v'
	colAssigned    = 'a'
	colOTPLen      = 'l'
	colMaxFail     = 'm'
	colRollout     = 's'
	colID          = 'i'
)

// Counter names of tokens.counts (a kind byte, \0, a value; "n" for all,
// "l" for the bytes of all serials).
const (
	cntAll      = "n"
	cntSerials  = "l"
	cntType     = 't'
	cntRealm    = 'r'
	cntORealm   = 'o'
	cntAssigned = 'a'
	cntActive   = 'v'
	cntRollout  = 's'
)

func counterKey(kind byte, value string) string { return string(kind) + "\x00" + value }

// sameListAttrs reports whether a and b agree on every field the list
// indexes keep (then a save moves no index entry).
func sameListAttrs(a, b *Token) bool {
	if a.ID != b.ID || a.Serial != b.Serial || a.Type != b.Type || a.Description != b.Description ||
		a.Active != b.Active || a.RolloutState != b.RolloutState || a.OTPLen != b.OTPLen || a.MaxFail != b.MaxFail ||
		!slices.Equal(a.Realms, b.Realms) || len(a.Info) != len(b.Info) {
		return false
	}
	if (a.Owner == nil) != (b.Owner == nil) || (a.Owner != nil && *a.Owner != *b.Owner) {
		return false
	}
	for k := range a.Info {
		if _, ok := b.Info[k]; !ok {
			return false
		}
	}
	return true
}

// ---- the attribute record ----

const attrFormat = 1

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encodeAttr encodes t's list attributes.
func encodeAttr(t *Token) []byte {
	b := make([]byte, 0, 96+len(t.Description))
	b = append(b, attrFormat)
	b = binary.AppendUvarint(b, t.ID)
	b = appendStr(b, t.Type)
	b = appendStr(b, t.Description)
	var flags byte
	if t.Active {
		flags |= 1
	}
	if t.Owner != nil {
		flags |= 2
	}
	b = append(b, flags)
	b = appendStr(b, t.RolloutState)
	b = binary.AppendVarint(b, int64(t.OTPLen))
	b = binary.AppendVarint(b, int64(t.MaxFail))
	b = binary.AppendUvarint(b, uint64(len(t.Realms)))
	for _, r := range t.Realms {
		b = appendStr(b, r)
	}
	if t.Owner != nil {
		for _, s := range []string{t.Owner.Realm, t.Owner.Resolver, t.Owner.UID, t.Owner.Login} {
			b = appendStr(b, s)
		}
	}
	keys := slices.Sorted(maps.Keys(t.Info))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendStr(b, k)
	}
	return b
}

// attrReader reads the binary forms of the index records and of the
// stored records' heads (Stats) without copying; the first error sticks
// (bad) and every later read returns zero values.
type attrReader struct {
	b   []byte
	bad bool
}

func (r *attrReader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *attrReader) varint() int64 {
	if r.bad {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *attrReader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// bytes reads a length-prefixed field without copying it.
func (r *attrReader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *attrReader) byte1() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// decodeAttr decodes an attribute record into a Token that has only the
// list attributes set (its tokeninfo has the keys, with empty values).
func decodeAttr(serial string, raw []byte) (*Token, error) {
	r := &attrReader{b: raw}
	if r.byte1() != attrFormat {
		return nil, fmt.Errorf("token: index record of %s has an unknown format", serial)
	}
	t := &Token{Serial: serial}
	t.ID = r.uvarint()
	t.Type = r.str()
	t.Description = r.str()
	flags := r.byte1()
	t.Active = flags&1 != 0
	t.RolloutState = r.str()
	t.OTPLen = int(r.varint())
	t.MaxFail = int(r.varint())
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad = true
	}
	for i := uint64(0); i < n && !r.bad; i++ {
		t.Realms = append(t.Realms, r.str())
	}
	if flags&2 != 0 {
		t.Owner = &user.User{Realm: r.str(), Resolver: r.str(), UID: r.str(), Login: r.str()}
	}
	n = r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad = true
	}
	t.Info = make(map[string]string, min(n, 64))
	for i := uint64(0); i < n && !r.bad; i++ {
		t.Info[r.str()] = ""
	}
	if r.bad {
		return nil, fmt.Errorf("token: index record of %s is corrupt", serial)
	}
	return t, nil
}

// ---- index entries ----

// sortable encodes an int so that byte order is numeric order.
func sortable(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v)^(1<<63))
}

// colText is a text value in a column key (a \0 would end it early).
func colText(s string) string { return strings.ReplaceAll(s, "\x00", "\x01") }

func colKey(col byte, value []byte, serial string) []byte {
	k := make([]byte, 0, 2+len(value)+len(serial))
	k = append(k, col)
	k = append(k, value...)
	k = append(k, 0)
	return append(k, serial...)
}

func b2byte(b bool) []byte {
	if b {
		return []byte{1}
	}
	return []byte{0}
}

type entry struct {
	bucket string
	key    string
}

// listEntries are the list index entries of t (besides its attribute
// record) and the counters it adds to.
func listEntries(t *Token) ([]entry, []string) {
	es := []entry{
		{bucketSerial, t.Serial},
		{bucketCol, string(colKey(colDescription, []byte(colText(t.Description)), t.Serial))},
		{bucketCol, string(colKey(colActive, b2byte(t.Active), t.Serial))},
		{bucketCol, string(colKey(colAssigned, b2byte(t.Assigned()), t.Serial))},
		{bucketCol, string(colKey(colOTPLen, sortable(int64(t.OTPLen)), t.Serial))},
		{bucketCol, string(colKey(colMaxFail, sortable(int64(t.MaxFail)), t.Serial))},
		{bucketCol, string(colKey(colRollout, []byte(colText(t.RolloutState)), t.Serial))},
		{bucketCol, string(colKey(colID, binary.BigEndian.AppendUint64(nil, t.ID), t.Serial))},
	}
	cs := []string{cntAll, counterKey(cntType, t.Type), counterKey(cntAssigned, string(b2byte(t.Assigned()))),
		counterKey(cntActive, string(b2byte(t.Active))), counterKey(cntRollout, t.RolloutState)}
	if t.Owner != nil {
		or := strings.ToLower(t.Owner.Realm)
		es = append(es, entry{bucketORealm, or + "\x00" + t.Serial})
		cs = append(cs, counterKey(cntORealm, or))
	}
	seen := map[string]bool{}
	for _, r := range t.Realms {
		lr := strings.ToLower(r)
		if seen[lr] {
			continue
		}
		seen[lr] = true
		cs = append(cs, counterKey(cntRealm, lr))
	}
	return es, cs
}

// indexState tells how save maintains the list indexes: fully, not at all
// (an old file whose rebuild has not reached this serial yet; the rebuild
// indexes the token as it then is).
func indexState(tx store.Tx, serial string) bool {
	if indexesComplete(tx) {
		return true
	}
	if cur := tx.Bucket(bucketCounts).Get(keyIndexBuilding); len(cur) > 0 {
		return serial <= string(cur[1:])
	}
	return false
}

// indexesComplete reports whether the list indexes hold every token.
func indexesComplete(tx store.Tx) bool {
	v := tx.Bucket(bucketCounts).Get(keyIndexVersion)
	return len(v) == 8 && binary.BigEndian.Uint64(v) == indexVersion
}

// markFreshIndexes records that a data file without tokens has complete
// list indexes (there is nothing to rebuild).
func markFreshIndexes(tx store.Tx) error {
	b := tx.Bucket(bucketCounts)
	if b.Get(keyIndexVersion) != nil || b.Get(keyIndexBuilding) != nil {
		return nil
	}
	if k, _ := tx.Bucket(bucketTokens).Cursor().First(); k != nil {
		return nil
	}
	return b.Put(keyIndexVersion, binary.BigEndian.AppendUint64(nil, indexVersion))
}

// countSerials sets the counter of the serials' bytes of complete
// indexes that lack it (built by an older release, which did not keep
// it). The list set sizes its memory by it, and only as a hint: a
// counter that is off (a file written by an older release after this
// one) costs the set's builder a copy, never a wrong set.
func countSerials(tx store.Tx) error {
	b := tx.Bucket(bucketCounts)
	if !indexesComplete(tx) || b.Get([]byte(cntSerials)) != nil || readCounter(b, cntAll) == 0 {
		return nil
	}
	var total uint64
	if err := tx.Bucket(bucketSerial).ForEach(nil, func(k, _ []byte) error {
		total += uint64(len(k))
		return nil
	}); err != nil {
		return err
	}
	return b.Put([]byte(cntSerials), binary.BigEndian.AppendUint64(nil, total))
}

// saveListIndexes moves t's list index entries from old (nil: a new
// token) to t (nil: a removed token), touching only those that differ.
func saveListIndexes(tx store.Tx, old, t *Token) error {
	serial := ""
	if t != nil {
		serial = t.Serial
	} else if old != nil {
		serial = old.Serial
	}
	if err := bumpGen(tx, serial); err != nil {
		return err
	}
	if old == nil && t != nil {
		if err := markFreshIndexes(tx); err != nil {
			return err
		}
	}
	if !indexState(tx, serial) {
		return nil
	}
	var oldE, newE []entry
	var oldC, newC []string
	if old != nil {
		oldE, oldC = listEntries(old)
	}
	if t != nil {
		newE, newC = listEntries(t)
		if err := tx.Bucket(bucketAttr).Put([]byte(t.Serial), encodeAttr(t)); err != nil {
			return err
		}
	} else if err := tx.Bucket(bucketAttr).Delete([]byte(serial)); err != nil {
		return err
	}
	for _, e := range oldE {
		if !slices.Contains(newE, e) {
			if err := tx.Bucket(e.bucket).Delete([]byte(e.key)); err != nil {
				return err
			}
		}
	}
	for _, e := range newE {
		if !slices.Contains(oldE, e) {
			if err := tx.Bucket(e.bucket).Put([]byte(e.key), []byte{}); err != nil {
				return err
			}
		}
	}
	delta := map[string]int64{}
	for _, c := range oldC {
		delta[c]--
	}
	for _, c := range newC {
		delta[c]++
	}
	if old != nil {
		delta[cntSerials] -= int64(len(old.Serial))
	}
	if t != nil {
		delta[cntSerials] += int64(len(t.Serial))
	}
	return addCounters(tx, delta)
}

func addCounters(tx store.Tx, delta map[string]int64) error {
	b := tx.Bucket(bucketCounts)
	for k, d := range delta {
		if d == 0 {
			continue
		}
		n := int64(readCounter(b, k)) + d
		var err error
		if n <= 0 {
			err = b.Delete([]byte(k))
		} else {
			err = b.Put([]byte(k), binary.BigEndian.AppendUint64(nil, uint64(n)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func readCounter(b store.Bucket, key string) int {
	v := b.Get([]byte(key))
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

// counterValues lists the values of one counter kind with their counts
// (the distinct types, realms or rollout states).
func counterValues(tx store.Tx, kind byte) (map[string]int, error) {
	out := map[string]int{}
	prefix := []byte{kind, 0}
	err := tx.Bucket(bucketCounts).ForEach(prefix, func(k, v []byte) error {
		if len(v) == 8 {
			out[string(k[len(prefix):])] = int(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return out, err
}

// ---- rebuilding ----

// IndexesReady reports whether the list indexes of the store are complete.
func (s *Service) IndexesReady(ctx context.Context) (bool, error) {
	ready := false
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		ready = indexesComplete(tx)
		if !ready && tx.Bucket(bucketCounts).Get(keyIndexBuilding) == nil {
			k, _ := tx.Bucket(bucketTokens).Cursor().First()
			ready = k == nil
		}
		return nil
	})
	return ready, err
}

// BuildIndexes builds the list indexes of a data file that lacks them (a
// file written by an older release), in transactions of a few thousand
// tokens, calling progress (may be nil) after each with the number of
// tokens indexed so far. Saves that run meanwhile keep the part already
// indexed current. It does nothing when the indexes are complete, and
// resumes an interrupted rebuild.
func (s *Service) BuildIndexes(ctx context.Context, progress func(done int)) error {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	if ok, err := s.IndexesReady(ctx); err != nil || ok {
		if err == nil && ok {
			// An empty file: record the version once. Indexes of an
			// older release: count the serials' bytes once.
			err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
				if err := markFreshIndexes(tx); err != nil {
					return err
				}
				return countSerials(tx)
			})
		}
		return err
	}
	// Start (or resume) at the recorded position.
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		if err := bumpGen(tx, ""); err != nil {
			return err
		}
		if tx.Bucket(bucketCounts).Get(keyIndexBuilding) != nil {
			return nil
		}
		for _, b := range []string{bucketAttr, bucketSerial, bucketORealm, bucketCol, bucketCounts} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketCounts).Put(keyIndexBuilding, []byte{'>'})
	})
	if err != nil {
		return err
	}
	done := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, more := 0, false
		err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
			n, more = 0, false
			counts := tx.Bucket(bucketCounts)
			cur := bytes.Clone(counts.Get(keyIndexBuilding))
			if len(cur) == 0 {
				return fmt.Errorf("token: the index rebuild lost its position")
			}
			cur = cur[1:]
			c := tx.Bucket(bucketTokens).Cursor()
			var k, v []byte
			if len(cur) == 0 {
				k, v = c.First()
			} else if k, v = c.Seek(cur); k != nil && bytes.Equal(k, cur) {
				k, v = c.Next()
			}
			delta := map[string]int64{}
			last := cur
			for ; k != nil; k, v = c.Next() {
				if n == indexBatch {
					more = true
					break
				}
				t, err := decodeRecord(string(k), v)
				if err != nil {
					return err
				}
				es, cs := listEntries(t)
				if err := tx.Bucket(bucketAttr).Put(k, encodeAttr(t)); err != nil {
					return err
				}
				for _, e := range es {
					if err := tx.Bucket(e.bucket).Put([]byte(e.key), []byte{}); err != nil {
						return err
					}
				}
				for _, c := range cs {
					delta[c]++
				}
				delta[cntSerials] += int64(len(k))
				last = bytes.Clone(k)
				n++
			}
			if err := addCounters(tx, delta); err != nil {
				return err
			}
			if more {
				return counts.Put(keyIndexBuilding, append([]byte{'>'}, last...))
			}
			if err := counts.Delete(keyIndexBuilding); err != nil {
				return err
			}
			if err := bumpGen(tx, ""); err != nil {
				return err
			}
			return counts.Put(keyIndexVersion, binary.BigEndian.AppendUint64(nil, indexVersion))
		})
		if err != nil {
			return err
		}
		done += n
		if progress != nil {
			progress(done)
		}
		if !more {
			return nil
		}
	}
}
