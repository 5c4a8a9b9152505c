package passwd

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/authsrv/authsrv/internal/offheap"
)

// snapshot is one loaded version of the file: the file's text and, per
// user (in file order, by entry id), the offset of its line, plus sorted
// indexes of entry ids by the fields the store looks up and searches by.
// Fields are cut from the text when needed, so the memory is the file's
// size plus about 45 bytes per user. It is never modified after parse
// returns.
//
// At scale the text and the arrays live outside the Go heap (in mem,
// freed when the snapshot becomes unreachable), so that the collector
// neither counts them twice in its heap goal nor scans them. Whoever
// reads a snapshot keeps it reachable while it uses strings cut from it
// (runtime.KeepAlive), and copies what it returns (entry, the store's
// UserID).
type snapshot struct {
	mem   *offheap.Arena
	data  string
	lines []uint32 // entry id -> offset of its line in data
	// The email of each entry (from the gecos): offset in data and length
	// (0: none). looksLikeEmail caps addresses at 254 bytes.
	emailOff []uint32
	emailLen []uint8

	// Entry ids sorted by the lower-cased login, gecos and email, and by
	// the numeric uid (ties by entry id).
	byLogin, byDesc, byEmail, byUID []uint32
	// Beside byLogin, the first 8 bytes of each folded login (big-endian,
	// zero-padded), and beside byUID each numeric uid: lookups search
	// these compact arrays and touch the text only to settle ties.
	loginKeys []uint64
	uidKeys   []uint32
	// loginHash is an open-addressing table of exact logins: entry id+1
	// per slot (0 empty), at least twice as many slots as users, probed
	// linearly from the login's hash. It serves UserID, the lookup of
	// every authentication, in about two memory reads.
	loginHash []uint32
	seed      maphash.Seed

	skipped    int // malformed lines
	duplicates int // lines whose login or uid an earlier line already has
	stat       fileStat
}

func (s *snapshot) count() int { return len(s.lines) }

// line is entry id's line without its end.
func (s *snapshot) line(id uint32) string {
	l := s.data[s.lines[id]:]
	if i := strings.IndexByte(l, '\n'); i >= 0 {
		l = l[:i]
	}
	return strings.TrimSuffix(l, "\r")
}

// field is the k-th colon-separated field of entry id's line (the line
// parsed, so all seven exist).
func (s *snapshot) field(id uint32, k int) string {
	l := s.line(id)
	for range k {
		l = l[strings.IndexByte(l, ':')+1:]
	}
	if i := strings.IndexByte(l, ':'); i >= 0 {
		l = l[:i]
	}
	return l
}

// login is the first field: a parsed line has its colons before its end,
// so the cut needs no look for the line's end.
func (s *snapshot) login(id uint32) string {
	l := s.data[s.lines[id]:]
	return l[:strings.IndexByte(l, ':')]
}
func (s *snapshot) uid(id uint32) string   { return s.field(id, 2) }
func (s *snapshot) gecos(id uint32) string { return s.field(id, 4) }
func (s *snapshot) email(id uint32) string {
	o := s.emailOff[id]
	return s.data[o : o+uint32(s.emailLen[id])]
}
func (s *snapshot) uidNum(id uint32) uint32 {
	n, _ := parseUID(s.uid(id))
	return n
}

// entry parses a copy of entry id's line: its fields outlive the
// snapshot.
func (s *snapshot) entry(id uint32) entry {
	e, _ := parseLine(strings.Clone(s.line(id)))
	return e
}

// byLoginExact returns the entry whose login is exactly login.
func (s *snapshot) byLoginExact(login string) (uint32, bool) {
	if len(s.loginHash) == 0 {
		return 0, false
	}
	mask := uint64(len(s.loginHash) - 1)
	for i := maphash.String(s.seed, login) & mask; ; i = (i + 1) & mask {
		v := s.loginHash[i]
		if v == 0 {
			return 0, false
		}
		if s.login(v-1) == login {
			return v - 1, true
		}
	}
}

// hashLogins builds loginHash (logins are unique once duplicates are
// removed).
func (s *snapshot) hashLogins() {
	n := s.count()
	if n == 0 {
		s.loginHash = nil
		return
	}
	size := 1
	for size < 2*n {
		size <<= 1
	}
	s.seed = maphash.MakeSeed()
	s.loginHash = offheap.Make[uint32](s.mem, size, size)
	mask := uint64(size - 1)
	for id := range uint32(n) {
		i := maphash.String(s.seed, s.login(id)) & mask
		for s.loginHash[i] != 0 {
			i = (i + 1) & mask
		}
		s.loginHash[i] = id + 1
	}
}

// byUIDExact returns the entry whose uid field is exactly uid.
func (s *snapshot) byUIDExact(uid string) (uint32, bool) {
	n, ok := parseUID(uid)
	if !ok {
		return 0, false
	}
	lo, hi := s.uidRange(uint64(n), uint64(n))
	for _, id := range s.byUID[lo:hi] {
		if s.uid(id) == uid {
			return id, true
		}
	}
	return 0, false
}

// uidRange is the span of byUID whose numeric uids lie in [lo, hi].
func (s *snapshot) uidRange(lo, hi uint64) (int, int) {
	if lo > hi {
		return 0, 0
	}
	a := sort.Search(len(s.uidKeys), func(i int) bool { return uint64(s.uidKeys[i]) >= lo })
	b := a + sort.Search(len(s.uidKeys)-a, func(i int) bool { return uint64(s.uidKeys[a+i]) > hi })
	return a, b
}

// prefixKey is the first 8 bytes of a folded text, big-endian and
// zero-padded, as makeKey's k0.
func prefixKey(p string) uint64 {
	var b [8]byte
	copy(b[:], p)
	return binary.BigEndian.Uint64(b[:])
}

// loginRange is foldRange over byLogin for the folded p: first through
// loginKeys, then over the text within the keys' span.
func (s *snapshot) loginRange(p string, prefix bool) (int, int) {
	pk := prefixKey(p)
	keys := s.loginKeys
	if prefix && len(p) < 8 {
		// Every login whose key starts with p's bytes, and no other.
		lo := sort.Search(len(keys), func(i int) bool { return keys[i] >= pk })
		if len(p) == 0 {
			return lo, len(keys)
		}
		end := pk + uint64(1)<<(8*(8-len(p)))
		if end < pk { // p's bytes are all 0xff: to the end
			return lo, len(keys)
		}
		return lo, sort.Search(len(keys), func(i int) bool { return keys[i] >= end })
	}
	lo := sort.Search(len(keys), func(i int) bool { return keys[i] >= pk })
	hi := lo + sort.Search(len(keys)-lo, func(i int) bool { return keys[lo+i] > pk })
	a, b := foldRange(s.byLogin[lo:hi], s.login, p, prefix)
	return lo + a, lo + b
}

// fold is the case folding of searches (strings.ToLower, as the
// patterns use), without allocating for lower-case ASCII.
func fold(s string) string { return strings.ToLower(s) }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// foldCompare compares fold(a) with fold(b) byte-wise.
func foldCompare(a, b string) int {
	if !isASCII(a) || !isASCII(b) {
		return strings.Compare(fold(a), fold(b))
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if x, y := lowerASCII(a[i]), lowerASCII(b[i]); x != y {
			return cmp.Compare(x, y)
		}
	}
	return cmp.Compare(len(a), len(b))
}

// foldRange is the span of idx (sorted by fold(get(id))) whose folded
// value equals p, or with prefix has p as a prefix. p is folded.
func foldRange(idx []uint32, get func(uint32) string, p string, prefix bool) (int, int) {
	lo := sort.Search(len(idx), func(i int) bool { return foldCompare(get(idx[i]), p) >= 0 })
	hi := lo + sort.Search(len(idx)-lo, func(i int) bool {
		v := get(idx[lo+i])
		if prefix {
			f := fold(v)
			return !strings.HasPrefix(f, p)
		}
		return foldCompare(v, p) > 0
	})
	return lo, hi
}

// sortKey orders entries by a folded field without reading the text on
// most comparisons: the first 16 folded bytes, the folded length, and the
// entry id.
type sortKey struct {
	k0, k1 uint64
	n      uint32
	id     uint32
}

func makeKey(v string, id uint32) sortKey {
	if !isASCII(v) {
		v = fold(v)
	}
	var b [16]byte
	n := copy(b[:], v)
	for i := range n {
		b[i] = lowerASCII(b[i])
	}
	return sortKey{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), uint32(len(v)), id}
}

// sortFolded returns the entry ids 0..n-1 sorted by fold(get(id)), ties
// by id, and with withKeys each one's first 8 folded bytes (prefixKey).
// The results come from mem; the keys are scratch memory freed on return.
func sortFolded(mem *offheap.Arena, n int, get func(uint32) string, withKeys bool) ([]uint32, []uint64) {
	scratch := offheap.New()
	defer scratch.Free()
	keys := offheap.Make[sortKey](scratch, n, n)
	for i := range n {
		keys[i] = makeKey(get(uint32(i)), uint32(i))
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if c := cmp.Compare(a.k0, b.k0); c != 0 {
			return c
		}
		if c := cmp.Compare(a.k1, b.k1); c != 0 {
			return c
		}
		if a.n > 16 && b.n > 16 {
			if c := foldCompare(get(a.id), get(b.id)); c != 0 {
				return c
			}
		} else if c := cmp.Compare(a.n, b.n); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	ids := offheap.Make[uint32](mem, n, n)
	for i, k := range keys {
		ids[i] = k.id
	}
	if !withKeys {
		return ids, nil
	}
	k0 := offheap.Make[uint64](mem, n, n)
	for i, k := range keys {
		k0[i] = k.k0
	}
	return ids, k0
}

// progress is told how far a load has got (bytes of the text parsed).
type progress func(done int)

// parsed is what one worker's parse of a span of the text found.
type parsed struct {
	lines, emailOff []uint32
	emailLen        []uint8
	skipped         int
}

// parseSpan parses the lines of data[from:to] (to at a line end or the
// end of data), appending to p's arrays, which have room for every line
// of the span (they never grow past it).
func parseSpan(ctx context.Context, p parsed, data string, from, to int, done *atomic.Int64, report progress) (parsed, error) {
	off, last := from, from
	for lineNo := 1; off < to; lineNo++ {
		if lineNo&8191 == 0 {
			if err := ctx.Err(); err != nil {
				return p, err
			}
			if lineNo&(1<<16-1) == 0 {
				d := done.Add(int64(off - last))
				last = off
				if report != nil {
					report(int(d))
				}
			}
		}
		line := data[off:to]
		next := to
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		start := off
		off = next
		e, ok := parseLine(line)
		if !ok {
			if !ignorable(line) {
				p.skipped++
			}
			continue
		}
		p.lines = append(p.lines, uint32(start))
		var eo uint32
		if e.email != "" {
			// e.email is a substring of the line: its offset in data.
			eo = uint32(start + strings.Index(line, e.email))
		}
		p.emailOff = append(p.emailOff, eo)
		p.emailLen = append(p.emailLen, uint8(len(e.email)))
	}
	done.Add(int64(off - last))
	return p, nil
}

// parallelMin is the smallest file parsed and indexed by several
// goroutines (tests lower it).
var parallelMin = 4 << 20

// parseWorkers is how many goroutines parse and index a file.
func parseWorkers(size int) int {
	if size < parallelMin {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), 4)
}

// parse reads the file's text. Comments, blank and malformed lines are
// skipped. A login or uid seen before is skipped too (counted as a
// duplicate): the first line wins, as with getpwnam and getpwuid, and
// every login maps to one uid and back. Big files are parsed and indexed
// by several goroutines.
func parse(ctx context.Context, data string, report progress) (*snapshot, error) {
	mem := offheap.New()
	s, err := parseIn(ctx, mem, data, report)
	if err != nil {
		mem.Free()
	}
	return s, err
}

// parseIn is parse with the snapshot's arrays in mem, which becomes the
// snapshot's (freed once the snapshot is unreachable; data may be in it
// too). On an error mem is the caller's to free.
func parseIn(ctx context.Context, mem *offheap.Arena, data string, report progress) (*snapshot, error) {
	workers := parseWorkers(len(data))
	// Cut the text into spans at line ends.
	bounds := []int{0}
	for w := 1; w < workers; w++ {
		at := max(bounds[len(bounds)-1], len(data)*w/workers)
		if i := strings.IndexByte(data[at:], '\n'); i >= 0 {
			at += i + 1
		} else {
			at = len(data)
		}
		bounds = append(bounds, at)
	}
	bounds = append(bounds, len(data))
	// Every worker parses into its own stretch of the snapshot's arrays,
	// sized for every line of its span (a line per \n, and one without
	// it at the end); the stretches are then moved together, so the
	// arrays are mapped once, at the size of the file's lines.
	room := make([]int, workers+1) // worker w's stretch: [room[w], room[w+1])
	for w := range workers {
		room[w+1] = room[w] + strings.Count(data[bounds[w]:bounds[w+1]], "\n") + 1
	}
	n := room[workers]
	all := parsed{lines: offheap.Make[uint32](mem, n, n), emailOff: offheap.Make[uint32](mem, n, n), emailLen: offheap.Make[uint8](mem, n, n)}
	parts := make([]parsed, workers)
	for w := range workers {
		a, b := room[w], room[w+1]
		parts[w] = parsed{lines: all.lines[a:a:b], emailOff: all.emailOff[a:a:b], emailLen: all.emailLen[a:a:b]}
	}
	errs := make([]error, workers)
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		rep := report
		if w > 0 {
			rep = nil // one worker reports the sum
		}
		wg.Go(func() { parts[w], errs[w] = parseSpan(ctx, parts[w], data, bounds[w], bounds[w+1], &done, rep) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Move the stretches together (each down to where the ones before it
	// end: copy allows the overlap).
	s := &snapshot{mem: mem, data: data}
	s.lines, s.emailOff, s.emailLen = all.lines[:0], all.emailOff[:0], all.emailLen[:0]
	for _, p := range parts {
		s.lines = append(s.lines, p.lines...)
		s.emailOff = append(s.emailOff, p.emailOff...)
		s.emailLen = append(s.emailLen, p.emailLen...)
		s.skipped += p.skipped
	}
	s.lines = slices.Clip(s.lines)
	s.emailOff, s.emailLen = slices.Clip(s.emailOff), slices.Clip(s.emailLen)
	s.index(workers)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if drop := s.duplicateIDs(); len(drop) > 0 {
		s.duplicates = len(drop)
		s.remove(drop)
	}
	s.hashLogins()
	offheap.Attach(s, mem)
	return s, nil
}

// index builds the sorted indexes, several at a time.
func (s *snapshot) index(workers int) {
	n := s.count()
	jobs := []func(){
		func() { s.byLogin, s.loginKeys = sortFolded(s.mem, n, s.login, true) },
		func() { s.byDesc, _ = sortFolded(s.mem, n, s.gecos, false) },
		func() { s.byEmail, _ = sortFolded(s.mem, n, s.email, false) },
		func() { s.byUID, s.uidKeys = sortUIDs(s.mem, n, s.uidNum) },
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for _, job := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			job()
		})
	}
	wg.Wait()
}

// sortUIDs returns the entry ids sorted by numeric uid, ties by id, and
// each one's uid (from mem; the keys are scratch memory).
func sortUIDs(mem *offheap.Arena, n int, num func(uint32) uint32) ([]uint32, []uint32) {
	scratch := offheap.New()
	defer scratch.Free()
	keys := offheap.Make[uint64](scratch, n, n)
	for i := range n {
		keys[i] = uint64(num(uint32(i)))<<32 | uint64(i)
	}
	slices.Sort(keys)
	ids, nums := offheap.Make[uint32](mem, n, n), offheap.Make[uint32](mem, n, n)
	for i, k := range keys {
		ids[i], nums[i] = uint32(k), uint32(k>>32)
	}
	return ids, nums
}

// duplicateIDs returns, in file order, the entries the first-line-wins
// rule drops. Only entries that share a login or a uid with another
// entry (neighbours in the sorted indexes) can be dropped; the rule runs
// in file order over those alone.
func (s *snapshot) duplicateIDs() []uint32 {
	var involved []uint32
	runs := func(idx []uint32, same func(a, b uint32) bool, get func(uint32) string) {
		for i := 0; i < len(idx); {
			j := i + 1
			for j < len(idx) && same(idx[i], idx[j]) {
				j++
			}
			if j-i > 1 {
				// A run of equal keys: its members whose exact value
				// repeats are involved.
				run := slices.Clone(idx[i:j])
				slices.SortFunc(run, func(a, b uint32) int { return strings.Compare(get(a), get(b)) })
				for a := 0; a < len(run); {
					b := a + 1
					for b < len(run) && get(run[b]) == get(run[a]) {
						b++
					}
					if b-a > 1 {
						involved = append(involved, run[a:b]...)
					}
					a = b
				}
			}
			i = j
		}
	}
	runs(s.byLogin, func(a, b uint32) bool { return foldCompare(s.login(a), s.login(b)) == 0 }, s.login)
	runs(s.byUID, func(a, b uint32) bool { return s.uidNum(a) == s.uidNum(b) }, s.uid)
	if len(involved) == 0 {
		return nil
	}
	slices.Sort(involved)
	involved = slices.Compact(involved)
	logins, uids := map[string]bool{}, map[string]bool{}
	var drop []uint32
	for _, id := range involved {
		l, u := s.login(id), s.uid(id)
		if logins[l] || uids[u] {
			drop = append(drop, id)
			continue
		}
		logins[l], uids[u] = true, true
	}
	return drop
}

// remove drops the entries drop (sorted) and renumbers the rest.
func (s *snapshot) remove(drop []uint32) {
	n := s.count()
	scratch := offheap.New()
	defer scratch.Free()
	remap := offheap.Make[uint32](scratch, n, n)
	const gone = ^uint32(0)
	next, d := uint32(0), 0
	for id := range n {
		if d < len(drop) && drop[d] == uint32(id) {
			remap[id] = gone
			d++
			continue
		}
		remap[id] = next
		s.lines[next], s.emailOff[next], s.emailLen[next] = s.lines[id], s.emailOff[id], s.emailLen[id]
		next++
	}
	s.lines, s.emailOff, s.emailLen = slices.Clip(s.lines[:next]), slices.Clip(s.emailOff[:next]), slices.Clip(s.emailLen[:next])
	for _, idx := range []*[]uint32{&s.byLogin, &s.byDesc, &s.byEmail, &s.byUID} {
		// In place: an entry is written at or before where it was read.
		out := (*idx)[:0]
		lk, uk := s.loginKeys[:0], s.uidKeys[:0]
		for i, id := range *idx {
			r := remap[id]
			if r == gone {
				continue
			}
			// The keys beside an index move with it.
			switch idx {
			case &s.byLogin:
				lk = append(lk, s.loginKeys[i])
			case &s.byUID:
				uk = append(uk, s.uidKeys[i])
			}
			out = append(out, r)
		}
		*idx = slices.Clip(out)
		switch idx {
		case &s.byLogin:
			s.loginKeys = lk
		case &s.byUID:
			s.uidKeys = uk
		}
	}
}
