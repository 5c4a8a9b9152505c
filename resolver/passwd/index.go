package passwd

import (
	"cmp"
	"context"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// snapshot is one loaded version of the file: the file's text and, per
// user (in file order, by entry id), the offset of its line, plus sorted
// indexes of entry ids by the fields the store looks up and searches by.
// Fields are cut from the text when needed, so the memory is the file's
// size plus about 25 bytes per user. It is never modified after parse
// returns.
type snapshot struct {
	data  string
	lines []uint32 // entry id -> offset of its line in data
	// The email of each entry (from the gecos): offset in data and length
	// (0: none). looksLikeEmail caps addresses at 254 bytes.
	emailOff []uint32
	emailLen []uint8

	// Entry ids sorted by the lower-cased login, gecos and email, and by
	// the numeric uid (ties by entry id).
	byLogin, byDesc, byEmail, byUID []uint32

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

func (s *snapshot) login(id uint32) string { return s.field(id, 0) }
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

// entry parses entry id's line.
func (s *snapshot) entry(id uint32) entry {
	e, _ := parseLine(s.line(id))
	return e
}

// byLoginExact returns the entry whose login is exactly login.
func (s *snapshot) byLoginExact(login string) (uint32, bool) {
	lo, hi := foldRange(s.byLogin, s.login, fold(login), false)
	for _, id := range s.byLogin[lo:hi] {
		if s.login(id) == login {
			return id, true
		}
	}
	return 0, false
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
	a := sort.Search(len(s.byUID), func(i int) bool { return uint64(s.uidNum(s.byUID[i])) >= lo })
	b := a + sort.Search(len(s.byUID)-a, func(i int) bool { return uint64(s.uidNum(s.byUID[a+i])) > hi })
	return a, b
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
			return !strings.HasPrefix(f, p) && f > p
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
// by id.
func sortFolded(n int, get func(uint32) string) []uint32 {
	keys := make([]sortKey, n)
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
	ids := make([]uint32, n)
	for i, k := range keys {
		ids[i] = k.id
	}
	return ids
}

// seenSet remembers strings by a 64-bit hash, falling back to the text on
// a collision; it costs about 12 bytes per string while a file loads.
type seenSet struct {
	seed  maphash.Seed
	first map[uint64]uint32 // hash -> entry id that has it
	extra map[string]bool   // strings whose hash another string had first
}

func newSeenSet(n int) *seenSet {
	return &seenSet{seed: maphash.MakeSeed(), first: make(map[uint64]uint32, n)}
}

// has reports whether v was added (get reads an added entry's value).
func (s *seenSet) has(v string, get func(uint32) string) bool {
	id, ok := s.first[maphash.String(s.seed, v)]
	if !ok {
		return false
	}
	return get(id) == v || s.extra[v]
}

func (s *seenSet) add(v string, id uint32, get func(uint32) string) {
	h := maphash.String(s.seed, v)
	if prev, ok := s.first[h]; ok && get(prev) != v {
		if s.extra == nil {
			s.extra = map[string]bool{}
		}
		s.extra[v] = true
		return
	}
	s.first[h] = id
}

// progress is told how far a load has got (bytes of the text read).
type progress func(done int)

// parse reads the file's text. Comments, blank and malformed lines are
// skipped. A login or uid seen before is skipped too (counted as a
// duplicate): the first line wins, as with getpwnam and getpwuid, and
// every login maps to one uid and back.
func parse(ctx context.Context, data string, report progress) (*snapshot, error) {
	s := &snapshot{data: data}
	estimate := strings.Count(data, "\n") + 1
	s.lines = make([]uint32, 0, estimate)
	s.emailOff = make([]uint32, 0, estimate)
	s.emailLen = make([]uint8, 0, estimate)
	logins, uids := newSeenSet(estimate), newSeenSet(estimate)
	off := 0
	for lineNo := 1; off < len(data); lineNo++ {
		if lineNo&8191 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if report != nil && lineNo&(1<<18-1) == 0 {
				report(off)
			}
		}
		line := data[off:]
		next := len(data)
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		start := off
		off = next
		e, ok := parseLine(line)
		if !ok {
			if !ignorable(line) {
				s.skipped++
			}
			continue
		}
		if logins.has(e.login, s.login) || uids.has(e.uid, s.uid) {
			s.duplicates++
			continue
		}
		id := uint32(len(s.lines))
		s.lines = append(s.lines, uint32(start))
		var eo uint32
		if e.email != "" {
			// e.email is a substring of the line: its offset in data.
			eo = uint32(start + strings.Index(line, e.email))
		}
		s.emailOff = append(s.emailOff, eo)
		s.emailLen = append(s.emailLen, uint8(len(e.email)))
		logins.add(e.login, id, s.login)
		uids.add(e.uid, id, s.uid)
	}
	logins, uids = nil, nil
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := len(s.lines)
	s.lines = slices.Clip(s.lines)
	s.emailOff, s.emailLen = slices.Clip(s.emailOff), slices.Clip(s.emailLen)
	s.byLogin = sortFolded(n, s.login)
	s.byDesc = sortFolded(n, s.gecos)
	s.byEmail = sortFolded(n, s.email)
	type un struct{ num, id uint32 }
	nums := make([]un, n)
	for i := range n {
		nums[i] = un{s.uidNum(uint32(i)), uint32(i)}
	}
	slices.SortFunc(nums, func(a, b un) int {
		if c := cmp.Compare(a.num, b.num); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	s.byUID = make([]uint32, n)
	for i, x := range nums {
		s.byUID[i] = x.id
	}
	return s, ctx.Err()
}
