package token

// The list set: an in-memory compact copy of the list attributes that
// broad lists scan instead of walking and intersecting the store's
// indexes.
//
// A serial wildcard with an infix or suffix (serial=*abc*), two large
// filters together (realm and type, a realm administrator's visible realms
// and anything else) and deep pages of a large walk all need every
// candidate looked at to count them. The set keeps, per token in serial
// order, the serial in lower case in one byte slice (with a \0 after
// each), its offset, 32 bits of the pairs of adjacent bytes it has, and
// small codes of its type, owner realm, token realms, rollout state and
// flags (active, assigned). A serial wildcard is a pass over the pair
// bits (an entry without every pair of the pattern's literal parts is
// ruled out with one AND) and a match of the text of the rest; the other
// filters are table lookups on the codes. At 1M tokens of 12-character
// serials it takes about 31 MB (13 MB serials, 4 MB offsets, 4 MB pair
// bits, 1 MB case classes, 8 MB codes, 1 MB flags); a patch holds the
// old and the new set until the lists still reading the old one end.
//
// An n-gram index on disk was the alternative for the wildcards: it costs
// a write of every n-gram per created token (many times the data of the
// serial, on every enrollment and import), still needs the intersection of
// large posting lists for short infixes and a count over them, and would
// not answer realm+type either. The set answers both from one structure,
// and its pair bits are the in-memory n-gram filter at 4 bytes a token.
//
// Consistency: every change of a token's list attributes (create, delete,
// an owner, realm, type, state change) bumps a generation number in
// tokens.gen and logs the serial under that generation, in the same
// transaction. A list reads the generation in its own read transaction
// and uses the set only when the set is of that generation; a set behind
// it is patched from the log of changed serials (re-reading their index
// records in that transaction) or rebuilt when the log no longer reaches
// back. A list whose snapshot is older than the set uses the indexes.
// Another Service, process or node writing the same store bumps the same
// number, so a set is never served stale. The set is built by the first
// list that needs it and dropped after listSetIdle without use.

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/internal/offheap"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

const (
	bucketGen = "tokens.gen"
	// genLogKeep is the number of changes the log keeps: a set further
	// behind is rebuilt.
	genLogKeep = 1 << 16
	// listSetIdle is how long an unused set stays in memory.
	listSetIdle = 10 * time.Minute
	// setMinWork is the walk (entries times their per-entry cost) above
	// which a list uses the set.
	setMinWork = 20000
)

var keyGen = []byte("g")

func genLogKey(g uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'l'}, g) }

// readGen is the list generation of the store as tx sees it.
func readGen(tx store.Tx) uint64 {
	v := tx.Bucket(bucketGen).Get(keyGen)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// bumpGen records a change of serial's list attributes ("" : of any
// token, a set must be rebuilt).
func bumpGen(tx store.Tx, serial string) error {
	b := tx.Bucket(bucketGen)
	g := readGen(tx) + 1
	if err := b.Put(keyGen, binary.BigEndian.AppendUint64(nil, g)); err != nil {
		return err
	}
	v := []byte{}
	if serial != "" {
		v = append([]byte{'s'}, serial...)
	}
	if err := b.Put(genLogKey(g), v); err != nil {
		return err
	}
	if g > genLogKeep {
		return b.Delete(genLogKey(g - genLogKeep))
	}
	return nil
}

// changedSince lists the serials changed after generation from up to
// to (sorted, each once); ok is false when the log does not reach back
// or says that everything changed.
func changedSince(tx store.Tx, from, to uint64) ([]string, bool) {
	if to-from > genLogKeep {
		return nil, false
	}
	c := tx.Bucket(bucketGen).Cursor()
	want := from + 1
	seen := map[string]bool{}
	for k, v := c.Seek(genLogKey(want)); k != nil && want <= to; k, v = c.Next() {
		if !bytes.Equal(k, genLogKey(want)) || len(v) < 2 || v[0] != 's' {
			return nil, false
		}
		seen[string(v[1:])] = true
		want++
	}
	if want <= to {
		return nil, false
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, true
}

// Case classes of a serial in the set.
const (
	caseLower = 0 // the key is the stored lower-case text
	caseUpper = 1 // every ASCII letter of the key is upper case
	caseOther = 2 // mixed or non-ASCII: the key is in listSet.other
)

// Flags of a set entry.
const (
	setActive   = 1
	setAssigned = 2
)

// listSet is the compact in-memory copy of the list attributes of every
// token at one generation. It is not changed while anything reads it.
//
// At scale its columns live outside the Go heap (in mem, freed once the
// set is unreachable), so that the collector neither counts them in its
// heap goal nor scans them. Every method that reads the columns keeps the
// set reachable until it is done (runtime.KeepAlive) and returns copies,
// never the columns' memory; text is for those methods alone.
//
// refs counts the lists reading the set, plus one while it is the
// Service's current set. When it falls to zero the set is recycled: the
// next patch or build writes the new set into its memory, which is
// already mapped and touched. A fresh mapping costs a page fault per page
// on first touch, several times the copy itself (at 1M tokens a patch
// took 110 ms in fresh memory, most of it faults, and the old sets
// waited for a collection to be unmapped).
type listSet struct {
	refs  atomic.Int32
	mem   *offheap.Arena
	gen   uint64
	lower []byte   // serials in key order, ASCII lower case, each ending in \0
	off   []uint32 // start of entry i in lower; off[n] = len(lower)
	class []uint8
	// pairs has, per entry, a bit for each pair of adjacent bytes of its
	// lower-case text (pairBit): a wildcard's literal parts rule out most
	// entries by it before their text is looked at.
	pairs []uint32
	other map[uint32]string // keys of caseOther entries
	// nonASCII is set when some serial has a byte >= 0x80 (then a
	// wildcard is matched per entry with the exact rule).
	nonASCII bool
	typ      []uint16
	orealm   []uint16 // 0: no owner
	rset     []uint16
	roll     []uint16
	flags    []uint8
	// The dictionaries of the codes.
	types   []string
	orealms []string // orealms[0] = "" (no owner)
	rsets   [][]string
	rolls   []string
}

func (ls *listSet) len() int { return len(ls.off) - 1 }

// bytes is the memory of the set's columns (without its dictionaries).
func (ls *listSet) bytes() int {
	return cap(ls.lower) + 4*(cap(ls.off)+cap(ls.pairs)) + cap(ls.class) + 2*(cap(ls.typ)+cap(ls.orealm)+cap(ls.rset)+cap(ls.roll)) + cap(ls.flags) +
		len(ls.other)*48
}

// text is entry i's lower-case serial.
func (ls *listSet) text(i int) []byte { return ls.lower[ls.off[i] : ls.off[i+1]-1] }

// serial is entry i's key.
func (ls *listSet) serial(i int) string {
	defer runtime.KeepAlive(ls)
	switch ls.class[i] {
	case caseLower:
		return string(ls.text(i))
	case caseUpper:
		return string(upperASCII(nil, ls.text(i)))
	}
	return ls.other[uint32(i)]
}

// appendSerial appends entry i's key to dst.
func (ls *listSet) appendSerial(dst []byte, i int) []byte {
	defer runtime.KeepAlive(ls)
	switch ls.class[i] {
	case caseLower:
		return append(dst, ls.text(i)...)
	case caseUpper:
		return upperASCII(dst, ls.text(i))
	}
	return append(dst, ls.other[uint32(i)]...)
}

func upperASCII(dst, k []byte) []byte {
	for _, c := range k {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// setBuilder appends entries to a set, interning the codes. The set's
// columns come from its arena, each mapped once at the size the builder
// is given: growing one (a size that fell short) would map a copy and
// hold both at once.
type setBuilder struct {
	ls                          *listSet
	typeIdx, orealmIdx, rollIdx map[string]uint16
	rsetIdx                     map[string]uint16
	buf                         []byte
	realms                      [][]byte // addAttr's scratch
	full                        bool     // a dictionary ran out of codes
}

// newSetBuilder starts a set of at most n entries whose serials take at
// most text bytes with their \0 ends: in spare's memory when spare (a
// recycled set, or nil) has room for it, else in new memory with room for
// later patches to grow into. A spare without room is freed.
func newSetBuilder(gen uint64, n, text int, dicts, spare *listSet) *setBuilder {
	var ls *listSet
	if spare != nil && spare.fits(n, text) {
		ls = spare
		ls.gen, ls.nonASCII = gen, false
		clear(ls.other)
		ls.lower, ls.off, ls.class, ls.pairs = ls.lower[:0], ls.off[:0], ls.class[:0], ls.pairs[:0]
		ls.typ, ls.orealm, ls.rset, ls.roll, ls.flags = ls.typ[:0], ls.orealm[:0], ls.rset[:0], ls.roll[:0], ls.flags[:0]
		ls.types, ls.orealms, ls.rsets, ls.rolls = nil, []string{""}, nil, nil
	} else {
		if spare != nil {
			spare.mem.Free()
		}
		// Room for a sixteenth more, so that the patches after the
		// tokens grew still fit in a recycled set.
		n, text = n+n/16+64, min(text+text/16+64*(maxSerialLen+1), 1<<32-1)
		mem := offheap.New()
		ls = &listSet{mem: mem, gen: gen, other: map[uint32]string{},
			lower: offheap.Make[byte](mem, 0, text), off: offheap.Make[uint32](mem, 0, n+1),
			class: offheap.Make[uint8](mem, 0, n), pairs: offheap.Make[uint32](mem, 0, n),
			typ: offheap.Make[uint16](mem, 0, n), orealm: offheap.Make[uint16](mem, 0, n), rset: offheap.Make[uint16](mem, 0, n),
			roll: offheap.Make[uint16](mem, 0, n), flags: offheap.Make[uint8](mem, 0, n), orealms: []string{""}}
		offheap.Attach(ls, mem)
	}
	b := &setBuilder{ls: ls, typeIdx: map[string]uint16{}, orealmIdx: map[string]uint16{}, rollIdx: map[string]uint16{}, rsetIdx: map[string]uint16{}}
	if dicts != nil {
		ls.types = slices.Clone(dicts.types)
		ls.orealms = slices.Clone(dicts.orealms)
		ls.rsets = slices.Clone(dicts.rsets)
		ls.rolls = slices.Clone(dicts.rolls)
		ls.nonASCII = dicts.nonASCII
	}
	for i, v := range ls.types {
		b.typeIdx[v] = uint16(i)
	}
	for i, v := range ls.orealms[1:] {
		b.orealmIdx[v] = uint16(i + 1)
	}
	for i, v := range ls.rolls {
		b.rollIdx[v] = uint16(i)
	}
	for i, v := range ls.rsets {
		b.rsetIdx[string(joinRealms(nil, v))] = uint16(i)
	}
	return b
}

func joinRealms(dst []byte, rs []string) []byte {
	for _, r := range rs {
		dst = append(append(dst, r...), 0)
	}
	return dst
}

func (b *setBuilder) intern(idx map[string]uint16, dict *[]string, v []byte) uint16 {
	if c, ok := idx[string(v)]; ok {
		return c
	}
	if len(*dict) >= 0xffff {
		b.full = true
		return 0
	}
	c := uint16(len(*dict))
	*dict = append(*dict, string(v))
	idx[string(v)] = c
	return c
}

// addAttr appends the token with key serial and attribute record raw;
// false: the record is corrupt.
func (b *setBuilder) addAttr(serial, raw []byte) bool {
	ls := b.ls
	r := &attrReader{b: raw}
	if r.byte1() != attrFormat {
		return false
	}
	r.uvarint() // id
	typ := r.bytes()
	r.bytes() // description
	flags := r.byte1()
	roll := r.bytes()
	r.varint() // otplen
	r.varint() // maxfail
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		return false
	}
	b.buf = b.buf[:0]
	realms := b.realms[:0]
	for i := uint64(0); i < n && !r.bad; i++ {
		rl := r.bytes()
		realms = append(realms, rl)
		b.buf = append(append(b.buf, rl...), 0)
	}
	b.realms = realms
	var oc uint16
	var fl uint8
	if flags&1 != 0 {
		fl |= setActive
	}
	if flags&2 != 0 {
		orealm := r.bytes()
		r.bytes() // resolver
		uid := r.bytes()
		r.bytes() // login
		if len(uid) > 0 {
			fl |= setAssigned
		}
		oc = b.intern(b.orealmIdx, &ls.orealms, orealm)
	}
	if r.bad {
		return false
	}
	rc, ok := b.rsetIdx[string(b.buf)]
	if !ok {
		if len(ls.rsets) >= 0xffff {
			b.full = true
		} else {
			rs := make([]string, len(realms))
			for i, rl := range realms {
				rs[i] = string(rl)
			}
			rc = uint16(len(ls.rsets))
			ls.rsets = append(ls.rsets, rs)
			b.rsetIdx[string(b.buf)] = rc
		}
	}
	b.addSerial(serial)
	b.room(1)
	ls.typ = append(ls.typ, b.intern(b.typeIdx, &ls.types, typ))
	ls.roll = append(ls.roll, b.intern(b.rollIdx, &ls.rolls, roll))
	ls.orealm = append(ls.orealm, oc)
	ls.rset = append(ls.rset, rc)
	ls.flags = append(ls.flags, fl)
	return true
}

// room makes room for k more entries in the code columns.
func (b *setBuilder) room(k int) {
	ls := b.ls
	ls.typ = offheap.Grow(ls.mem, ls.typ, k)
	ls.orealm = offheap.Grow(ls.mem, ls.orealm, k)
	ls.rset = offheap.Grow(ls.mem, ls.rset, k)
	ls.roll = offheap.Grow(ls.mem, ls.roll, k)
	ls.flags = offheap.Grow(ls.mem, ls.flags, k)
}

func (b *setBuilder) addSerial(serial []byte) {
	ls := b.ls
	ls.off = offheap.Grow(ls.mem, ls.off, 2) // and finish's last offset
	ls.lower = offheap.Grow(ls.mem, ls.lower, len(serial)+1)
	ls.class = offheap.Grow(ls.mem, ls.class, 1)
	ls.pairs = offheap.Grow(ls.mem, ls.pairs, 1)
	i := len(ls.off)
	ls.off = append(ls.off, uint32(len(ls.lower)))
	start := len(ls.lower)
	ls.lower = lowerASCII(ls.lower, serial)
	low := ls.lower[start:]
	ls.lower = append(ls.lower, 0)
	class := uint8(caseOther)
	ascii := true
	for _, c := range serial {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		ls.nonASCII = true
	} else if bytes.Equal(low, serial) {
		class = caseLower
	} else if isUpperOf(serial, low) {
		class = caseUpper
	}
	if class == caseOther {
		ls.other[uint32(i)] = string(serial)
	}
	ls.class = append(ls.class, class)
	ls.pairs = append(ls.pairs, pairBits(low))
}

// pairBit is the bit of a pair of adjacent bytes.
func pairBit(a, b byte) uint32 {
	return 1 << ((uint32(a)*0x9E3779B1 ^ uint32(b)*0x85EBCA77) >> 27)
}

// pairBits are the bits of every pair of adjacent bytes of s.
func pairBits(s []byte) uint32 {
	var m uint32
	for i := 1; i < len(s); i++ {
		m |= pairBit(s[i-1], s[i])
	}
	return m
}

// isUpperOf reports whether k is low with every ASCII letter upper case.
func isUpperOf(k, low []byte) bool {
	for i, c := range low {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if k[i] != c {
			return false
		}
	}
	return true
}

// copyFrom appends entries [from, to) of old.
func (b *setBuilder) copyFrom(old *listSet, from, to int) {
	if from >= to {
		return
	}
	ls := b.ls
	defer runtime.KeepAlive(old)
	k := to - from
	ls.off = offheap.Grow(ls.mem, ls.off, k+1)
	ls.lower = offheap.Grow(ls.mem, ls.lower, int(old.off[to]-old.off[from]))
	ls.class = offheap.Grow(ls.mem, ls.class, k)
	ls.pairs = offheap.Grow(ls.mem, ls.pairs, k)
	b.room(k)
	shift := int64(len(ls.lower)) - int64(old.off[from])
	for i := from; i < to; i++ {
		ls.off = append(ls.off, uint32(int64(old.off[i])+shift))
		if old.class[i] == caseOther {
			ls.other[uint32(len(ls.off)-1)] = old.other[uint32(i)]
		}
	}
	ls.lower = append(ls.lower, old.lower[old.off[from]:old.off[to]]...)
	ls.class = append(ls.class, old.class[from:to]...)
	ls.pairs = append(ls.pairs, old.pairs[from:to]...)
	ls.typ = append(ls.typ, old.typ[from:to]...)
	ls.orealm = append(ls.orealm, old.orealm[from:to]...)
	ls.rset = append(ls.rset, old.rset[from:to]...)
	ls.roll = append(ls.roll, old.roll[from:to]...)
	ls.flags = append(ls.flags, old.flags[from:to]...)
}

// fits reports whether ls's columns hold n entries of text bytes.
func (ls *listSet) fits(n, text int) bool {
	return cap(ls.lower) >= text && cap(ls.off) >= n+1 && cap(ls.class) >= n && cap(ls.pairs) >= n && cap(ls.typ) >= n &&
		cap(ls.orealm) >= n && cap(ls.rset) >= n && cap(ls.roll) >= n && cap(ls.flags) >= n
}

// finish returns the set built, with one reference (the Service's), or
// nil when a dictionary ran out of codes.
func (b *setBuilder) finish() *listSet {
	if b.full {
		b.drop()
		return nil
	}
	b.ls.off = append(b.ls.off, uint32(len(b.ls.lower)))
	b.ls.refs.Store(1)
	return b.ls
}

// drop frees the memory of a set that finish did not return; its columns
// are dropped with it, so that it is never taken for a set with room.
func (b *setBuilder) drop() {
	ls := b.ls
	ls.mem.Free()
	ls.lower, ls.off, ls.class, ls.pairs = nil, nil, nil, nil
	ls.typ, ls.orealm, ls.rset, ls.roll, ls.flags = nil, nil, nil, nil, nil
}

// serialGuess is the serial length the set assumes when the store does
// not count the serials' bytes: privacyIDEA's generated serials (a
// four-letter prefix and eight hex digits).
const serialGuess = 12

// setText is the memory of the text of n serials of total bytes (with
// their \0 ends), bounded by the longest serial a token may have.
func setText(n, total int) int {
	return min(total+n, n*(maxSerialLen+1), 1<<32-1)
}

// buildListSet builds the set of every token from the index records tx
// sees (nil: the indexes are incomplete, a record is corrupt, or a
// dictionary is too large). Its columns are sized from the counters of
// tokens and of their serials' bytes, which the same snapshot keeps, so
// that each is mapped once, at its final size. spare (or nil) is a
// recycled set to build in (newSetBuilder).
func buildListSet(tx store.Tx, spare *listSet) *listSet {
	if !indexesComplete(tx) {
		return nil
	}
	counts := tx.Bucket(bucketCounts)
	n := readCounter(counts, cntAll)
	if n >= 1<<31 {
		return nil
	}
	total := readCounter(counts, cntSerials)
	if counts.Get([]byte(cntSerials)) == nil {
		total = n * serialGuess // a file whose indexes lack the counter
	}
	b := newSetBuilder(readGen(tx), n, setText(n, total), nil, spare)
	c := tx.Bucket(bucketAttr).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if !b.addAttr(k, v) || len(b.ls.lower) >= 1<<32-1<<16 {
			b.drop()
			return nil
		}
	}
	return b.finish()
}

// patchListSet is old with the serials changed since its generation
// re-read from tx, built in spare when it has room (newSetBuilder), or
// nil when the log does not reach back (then the set is rebuilt).
func patchListSet(tx store.Tx, old, spare *listSet) *listSet {
	gen := readGen(tx)
	changed, ok := changedSince(tx, old.gen, gen)
	if !ok || len(changed) > old.len()/8+64 || !indexesComplete(tx) {
		return nil
	}
	// At most every old entry and every changed serial.
	text := len(old.lower)
	for _, c := range changed {
		text += len(c) + 1
	}
	b := newSetBuilder(gen, old.len()+len(changed), text, old, spare)
	ac := tx.Bucket(bucketAttr).Cursor()
	var at []byte
	pos := 0
	for _, changedSerial := range changed {
		serial := []byte(changedSerial)
		// The first entry at or after the serial.
		i := pos + sort.Search(old.len()-pos, func(j int) bool {
			at = old.appendSerial(at[:0], pos+j)
			return string(at) >= changedSerial
		})
		b.copyFrom(old, pos, i)
		pos = i
		if pos < old.len() {
			at = old.appendSerial(at[:0], pos)
			if string(at) == changedSerial {
				pos++ // replaced or deleted
			}
		}
		if k, v := ac.Seek(serial); string(k) == changedSerial {
			if !b.addAttr(k, v) {
				b.drop()
				return nil
			}
		}
	}
	b.copyFrom(old, pos, old.len())
	if len(b.ls.lower) >= 1<<32-1<<16 {
		b.drop()
		return nil
	}
	return b.finish()
}

// currentListSet returns the set of tx's generation, building or
// patching it when this Service's is behind; nil when tx's snapshot is
// older than the set, or no set can be built. The caller holds a
// reference to the set it gets and gives it back with releaseSet.
func (s *Service) currentListSet(tx store.Tx) *listSet {
	gen := readGen(tx)
	if ls := s.lset.Load(); ls != nil && ls.acquire() {
		if ls.gen == gen {
			s.listSetUsed.Store(time.Now().UnixNano())
			return ls
		}
		s.releaseSet(ls)
	}
	s.listSetMu.Lock()
	defer s.listSetMu.Unlock()
	old := s.lset.Load()
	if old != nil && old.gen == gen {
		old.refs.Add(1) // the Service's reference keeps it above zero
		s.listSetUsed.Store(time.Now().UnixNano())
		return old
	}
	if old != nil && old.gen > gen {
		return nil
	}
	spare := s.spareSet.Swap(nil)
	var ls *listSet
	if old != nil {
		ls = patchListSet(tx, old, spare)
	}
	if ls == nil {
		ls = buildListSet(tx, spare)
	}
	if ls == nil {
		return nil
	}
	ls.refs.Add(1) // the caller's
	s.lset.Store(ls)
	s.listSetUsed.Store(time.Now().UnixNano())
	if old != nil {
		s.releaseSet(old) // the Service's reference
	} else {
		s.scheduleSetDrop(listSetIdle)
	}
	return ls
}

// acquire takes a reference to ls unless nothing holds one any more (it
// is being recycled).
func (ls *listSet) acquire() bool {
	for {
		n := ls.refs.Load()
		if n <= 0 {
			return false
		}
		if ls.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// releaseSet gives back a reference to ls. The last one recycles it: it
// becomes the spare the next patch or build writes into, or, when there
// is one already, its memory is freed.
func (s *Service) releaseSet(ls *listSet) {
	if ls.refs.Add(-1) != 0 {
		return
	}
	// Without a current set (dropped for idleness) nothing will patch
	// soon: free it.
	if s.lset.Load() == nil || !s.spareSet.CompareAndSwap(nil, ls) {
		ls.mem.Free()
	}
}

// WarmListSet builds the in-memory list set now, so that the first broad
// list does not pay for it (about 150 ms at 1M tokens on a 2-core
// machine). The set then holds about 31 bytes a token until it has gone
// unused for ten minutes. It does nothing while the list indexes are
// incomplete.
func (s *Service) WarmListSet(ctx context.Context) error {
	if err := s.ensureIndexes(ctx); err != nil {
		return err
	}
	return s.cfg.Store.View(ctx, func(tx store.Tx) error {
		if ls := s.currentListSet(tx); ls != nil {
			s.releaseSet(ls)
		}
		return nil
	})
}

// scheduleSetDrop drops the set, and the spare, once the set has not
// been used for listSetIdle.
func (s *Service) scheduleSetDrop(after time.Duration) {
	time.AfterFunc(after, func() {
		s.listSetMu.Lock()
		defer s.listSetMu.Unlock()
		if s.lset.Load() == nil {
			return
		}
		idle := time.Since(time.Unix(0, s.listSetUsed.Load()))
		if idle >= listSetIdle {
			s.releaseSet(s.lset.Swap(nil))
			if spare := s.spareSet.Swap(nil); spare != nil {
				spare.mem.Free()
			}
			return
		}
		s.scheduleSetDrop(listSetIdle - idle)
	})
}

// ---- queries on the set ----

// setQuery is a Filter's parts that the set answers.
type setQuery struct {
	ls *listSet
	// serial: the per-entry matcher of the Serial filter on the
	// lower-case text (nil: none); pairs: the pair bits every match has.
	serial      func(i int) bool
	pairs       uint32
	typ, roll   []bool
	orealm, rs  []bool
	visOR, visR []bool
	mask, want  uint8
	none        bool // no filter but the serial
}

// setAnswers reports whether the set can answer f's serial filter with
// the rule of listMatch (an ASCII spec).
func setAnswers(f *Filter) bool {
	for i := 0; i < len(f.Serial); i++ {
		if f.Serial[i] >= 0x80 {
			return false
		}
	}
	return true
}

// newSetQuery compiles the parts of f the set answers and clears them
// from rest.
func newSetQuery(ls *listSet, f Filter, rest *Filter) *setQuery {
	q := &setQuery{ls: ls}
	table := func(n int, sub Filter, probe func(i int) *Token) []bool {
		t := make([]bool, n)
		for i := range t {
			t[i] = sub.match(probe(i))
		}
		return t
	}
	if f.Type != "" || len(f.Types) > 0 {
		q.typ = table(len(ls.types), Filter{Type: f.Type, Types: f.Types}, func(i int) *Token { return &Token{Type: ls.types[i]} })
		rest.Type, rest.Types = "", nil
	}
	if f.RolloutState != "" {
		q.roll = table(len(ls.rolls), Filter{RolloutState: f.RolloutState}, func(i int) *Token { return &Token{RolloutState: ls.rolls[i]} })
		rest.RolloutState = ""
	}
	ownerProbe := func(i int) *Token {
		if i == 0 {
			return &Token{}
		}
		return &Token{Owner: &user.User{Realm: ls.orealms[i]}}
	}
	if f.UserRealm != "" {
		q.orealm = table(len(ls.orealms), Filter{UserRealm: f.UserRealm}, ownerProbe)
		rest.UserRealm = ""
	}
	if f.TokenRealm != "" {
		q.rs = table(len(ls.rsets), Filter{TokenRealm: f.TokenRealm}, func(i int) *Token { return &Token{Realms: ls.rsets[i]} })
		rest.TokenRealm = ""
	}
	if f.Visible != nil {
		q.visOR = table(len(ls.orealms), Filter{Visible: f.Visible}, ownerProbe)
		q.visR = table(len(ls.rsets), Filter{Visible: f.Visible}, func(i int) *Token { return &Token{Realms: ls.rsets[i]} })
		rest.Visible = nil
	}
	if f.Active != nil {
		q.mask |= setActive
		if *f.Active {
			q.want |= setActive
		}
		rest.Active = nil
	}
	if f.Assigned != nil {
		q.mask |= setAssigned
		if *f.Assigned {
			q.want |= setAssigned
		}
		rest.Assigned = nil
	}
	if f.Serial != "" {
		q.compileSerial(f.Serial)
		rest.Serial = ""
	}
	q.none = q.mask == 0 && q.typ == nil && q.orealm == nil && q.rs == nil && q.roll == nil && q.visR == nil
	return q
}

func (q *setQuery) compileSerial(spec string) {
	ls := q.ls
	elems := []string{spec}
	if bytes.ContainsRune([]byte(spec), ',') {
		elems = splitTrim(spec)
	}
	type elem struct {
		exact []byte
		parts [][]byte
	}
	var es []elem
	for _, e := range elems {
		if e == "" || e == "*" {
			return // matches every serial
		}
		le := lowerASCII(nil, []byte(e))
		if !bytes.Contains(le, []byte{'*'}) {
			es = append(es, elem{exact: le})
			continue
		}
		es = append(es, elem{parts: bytes.Split(le, []byte{'*'})})
	}
	if !ls.nonASCII && len(es) == 1 {
		if es[0].parts == nil {
			q.pairs = pairBits(es[0].exact)
		}
		for _, p := range es[0].parts {
			q.pairs |= pairBits(p)
		}
	}
	if !ls.nonASCII && len(es) == 1 && es[0].parts != nil {
		// One wildcard element: its common shapes without the general
		// rule.
		parts := es[0].parts
		first, last := parts[0], parts[len(parts)-1]
		switch {
		case len(parts) == 2 && len(last) == 0:
			q.serial = func(i int) bool { return bytes.HasPrefix(ls.text(i), first) }
			return
		case len(parts) == 2 && len(first) == 0:
			q.serial = func(i int) bool { return bytes.HasSuffix(ls.text(i), last) }
			return
		case len(parts) == 3 && len(first) == 0 && len(last) == 0 && len(parts[1]) == 1:
			c := parts[1][0]
			q.serial = func(i int) bool { return bytes.IndexByte(ls.text(i), c) >= 0 }
			return
		case len(parts) == 3 && len(first) == 0 && len(last) == 0:
			mid := parts[1]
			q.serial = func(i int) bool { return bytes.Contains(ls.text(i), mid) }
			return
		}
	}
	q.serial = func(i int) bool {
		if ls.class[i] == caseOther && ls.nonASCII {
			return listMatch(spec, ls.serial(i))
		}
		t := ls.text(i)
		for _, e := range es {
			if e.parts == nil && bytes.Equal(e.exact, t) || e.parts != nil && globMatchBytes(e.parts, t) {
				return true
			}
		}
		return false
	}
}

func splitTrim(spec string) []string {
	var out []string
	for _, p := range bytes.Split([]byte(spec), []byte{','}) {
		out = append(out, string(bytes.TrimSpace(p)))
	}
	return out
}

// others reports whether entry i passes the filters besides the serial.
func (q *setQuery) others(i int) bool {
	if q.none {
		return true
	}
	ls := q.ls
	if ls.flags[i]&q.mask != q.want {
		return false
	}
	if q.typ != nil && !q.typ[ls.typ[i]] {
		return false
	}
	if q.orealm != nil && !q.orealm[ls.orealm[i]] {
		return false
	}
	if q.rs != nil && !q.rs[ls.rset[i]] {
		return false
	}
	if q.roll != nil && !q.roll[ls.roll[i]] {
		return false
	}
	if q.visR != nil && !q.visR[ls.rset[i]] && !q.visOR[ls.orealm[i]] {
		return false
	}
	return true
}

// scanner walks the matching entries of a query in ascending order.
type scanner struct {
	q *setQuery
	i int // the next entry to look at
}

func (q *setQuery) scan() *scanner { return &scanner{q: q} }

// next returns the next matching entry, or -1.
func (sc *scanner) next() int {
	q, ls := sc.q, sc.q.ls
	defer runtime.KeepAlive(ls) // q.serial and q.others read its columns
	n := ls.len()
	if q.pairs != 0 {
		pairs, want := ls.pairs, q.pairs
		for i := sc.i; i < n; i++ {
			if pairs[i]&want == want && q.serial(i) && q.others(i) {
				sc.i = i + 1
				return i
			}
		}
		sc.i = n
		return -1
	}
	for sc.i < n {
		i := sc.i
		sc.i++
		if (q.serial == nil || q.serial(i)) && q.others(i) {
			return i
		}
	}
	return -1
}

// each calls fn for every matching entry in ascending order until fn
// returns false.
func (q *setQuery) each(fn func(i int) bool) {
	sc := q.scan()
	for i := sc.next(); i >= 0 && fn(i); i = sc.next() {
	}
}

// all reports whether q restricts nothing.
func (q *setQuery) all() bool {
	return q.serial == nil && q.mask == 0 && q.typ == nil && q.orealm == nil && q.rs == nil && q.roll == nil && q.visR == nil
}

// page returns the count of matches and the keys of matches [start,
// start+size) in the order desc asks.
func (q *setQuery) page(desc bool, start, size int) ([]string, int) {
	out := []string{}
	if q.all() {
		n := q.ls.len()
		for k := start; k < n && k-start < size; k++ {
			i := k
			if desc {
				i = n - 1 - k
			}
			out = append(out, q.ls.serial(i))
		}
		return out, n
	}
	count := 0
	if !desc {
		sc := q.scan()
		for i := sc.next(); i >= 0; i = sc.next() {
			if count >= start && count-start < size {
				out = append(out, q.ls.serial(i))
			}
			count++
		}
		return out, count
	}
	sc := q.scan()
	for i := sc.next(); i >= 0; i = sc.next() {
		count++
	}
	if start >= count {
		return out, count
	}
	lo, hi := count-min(start+size, count), count-start // ascending positions
	sc = q.scan()
	for k, i := 0, sc.next(); i >= 0 && k < hi; k, i = k+1, sc.next() {
		if k >= lo {
			out = append(out, q.ls.serial(i))
		}
	}
	slices.Reverse(out)
	return out, count
}

// Count returns how many tokens the store holds, from the indexes'
// counter; known is false while the indexes are incomplete (an older
// data file before its indexes are built).
func (s *Service) Count(ctx context.Context) (n int, known bool, err error) {
	err = s.cfg.Store.View(ctx, func(tx store.Tx) error {
		if known = indexesComplete(tx); known {
			n = readCounter(tx.Bucket(bucketCounts), cntAll)
		}
		return nil
	})
	return n, known, err
}
