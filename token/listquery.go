package token

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// SortColumns are the columns List sorts by.
var SortColumns = []string{"serial", "id", "tokentype", "type", "description", "active", "failcount", "count", "maxfail", "otplen", "rollout_state"}

// DefaultListCap is the most token records one list decodes: to count a
// filter that no index answers (infovalue), to sort by count or
// failcount, or to answer everything on one page. A query that would need
// more is refused with a parameter error naming the filters to add. Index
// records (no JSON) are checked up to scanFactor times as many.
const DefaultListCap = 20000

const scanFactor = 50

// errTooBroad refuses a query that would decode or check too many tokens.
func errTooBroad(what string, limit int) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf(
		"[ParameterError] %s would need more than %d tokens: add a filter that selects fewer tokens (serial, user, realm, tokenrealm or type)", what, limit))
}

// ---- ordered walks of serials ----

// serialIter yields serials in ascending (or, when built descending,
// descending) order, each once. The bytes are the store's: valid for the
// read transaction, never to be changed.
type serialIter interface {
	next() ([]byte, bool)
}

// prefixIter walks the keys of a bucket with a prefix. The serial is the
// key without its first strip bytes, or, with lastNul, what follows the
// key's last \0.
type prefixIter struct {
	c       store.Cursor
	prefix  []byte
	strip   int
	lastNul bool
	desc    bool
	started bool
	done    bool
}

func newPrefixIter(tx store.Tx, bucket string, prefix []byte, strip bool, desc bool) *prefixIter {
	it := &prefixIter{c: tx.Bucket(bucket).Cursor(), prefix: prefix, desc: desc}
	if strip {
		it.strip = len(prefix)
	}
	return it
}

// prefixEnd is the first key after every key with prefix (nil: none).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func (it *prefixIter) next() ([]byte, bool) {
	if it.done {
		return nil, false
	}
	var k []byte
	switch {
	case !it.started && it.desc:
		it.started = true
		if end := prefixEnd(it.prefix); end == nil {
			k, _ = it.c.Last()
		} else if k, _ = it.c.Seek(end); k == nil {
			k, _ = it.c.Last()
		} else {
			k, _ = it.c.Prev()
		}
	case !it.started:
		it.started = true
		if len(it.prefix) == 0 {
			k, _ = it.c.First()
		} else {
			k, _ = it.c.Seek(it.prefix)
		}
	case it.desc:
		k, _ = it.c.Prev()
	default:
		k, _ = it.c.Next()
	}
	if k == nil || !bytes.HasPrefix(k, it.prefix) {
		it.done = true
		return nil, false
	}
	if it.lastNul {
		return k[bytes.LastIndexByte(k, 0)+1:], true
	}
	return k[it.strip:], true
}

// mergeIter is the ordered union of ordered walks, without repeats.
type mergeIter struct {
	its   []serialIter
	heads [][]byte
	ok    []bool
	init  bool
	desc  bool
}

func union(desc bool, its ...serialIter) serialIter {
	if len(its) == 1 {
		return its[0]
	}
	return &mergeIter{its: its, heads: make([][]byte, len(its)), ok: make([]bool, len(its)), desc: desc}
}

func (m *mergeIter) next() ([]byte, bool) {
	if !m.init {
		m.init = true
		for i, it := range m.its {
			m.heads[i], m.ok[i] = it.next()
		}
	}
	best := -1
	for i := range m.its {
		if !m.ok[i] {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		if c := bytes.Compare(m.heads[i], m.heads[best]); (m.desc && c > 0) || (!m.desc && c < 0) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	v := m.heads[best]
	for i := range m.its {
		for m.ok[i] && bytes.Equal(m.heads[i], v) {
			m.heads[i], m.ok[i] = m.its[i].next()
		}
	}
	return v, true
}

type emptyIter struct{}

func (emptyIter) next() ([]byte, bool) { return nil, false }

// caseVariants are the spellings of a literal serial prefix that match it
// case-insensitively, in key order. Past maxLetters letters the prefix is
// cut (a shorter prefix narrows less but still matches).
func caseVariants(lit string) []string {
	const maxLetters = 8
	letters := 0
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c >= 0x80 {
			lit = lit[:i] // non-ASCII: no valid serial has it; narrow by what precedes it
			break
		}
		if 'a' <= c|0x20 && c|0x20 <= 'z' {
			if letters == maxLetters {
				lit = lit[:i]
				break
			}
			letters++
		}
	}
	out := []string{""}
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		lc := c | 0x20
		if 'a' <= lc && lc <= 'z' {
			uc := lc &^ 0x20
			next := make([]string, 0, 2*len(out))
			for _, p := range out {
				next = append(next, p+string(uc), p+string(lc))
			}
			out = next
			continue
		}
		for j := range out {
			out[j] += string(c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// serialKeyMatcher is the Serial filter as a function on key bytes (nil:
// no restriction); it allocates nothing.
func serialKeyMatcher(spec string) func([]byte) bool {
	if spec == "" {
		return nil
	}
	elems := []string{spec}
	if strings.Contains(spec, ",") {
		elems = strings.Split(spec, ",")
		for i := range elems {
			elems[i] = strings.TrimSpace(elems[i])
		}
	}
	var ms []func([]byte, []byte) bool // (key, its lower case)
	for _, e := range elems {
		switch {
		case e == "" || e == "*":
			return nil
		case !strings.Contains(e, "*"):
			eb := []byte(e)
			ms = append(ms, func(k, _ []byte) bool { return bytes.EqualFold(eb, k) })
		default:
			var parts [][]byte
			for _, p := range strings.Split(strings.ToLower(e), "*") {
				parts = append(parts, []byte(p))
			}
			ms = append(ms, func(_, lk []byte) bool { return globMatchBytes(parts, lk) })
		}
	}
	var buf []byte
	return func(k []byte) bool {
		buf = lowerASCII(buf[:0], k)
		for _, m := range ms {
			if m(k, buf) {
				return true
			}
		}
		return false
	}
}

// lowerASCII appends k in lower case (ASCII letters; other bytes as they
// are, so non-ASCII text matches as written).
func lowerASCII(dst, k []byte) []byte {
	for _, c := range k {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// globMatchBytes is globMatch on bytes.
func globMatchBytes(parts [][]byte, s []byte) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !bytes.HasPrefix(s, first) || !bytes.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := bytes.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}

// keyFilterIter walks the serials of prefix walks (one after the other)
// that keep accepts.
type keyFilterIter struct {
	its  []*prefixIter
	cur  int
	keep func([]byte) bool
}

func (f *keyFilterIter) next() ([]byte, bool) {
	for f.cur < len(f.its) {
		k, ok := f.its[f.cur].next()
		if !ok {
			f.cur++
			continue
		}
		if f.keep(k) {
			return k, true
		}
	}
	return nil, false
}

// serialRanges walks the serials that the literal prefixes of the Serial
// filter's elements allow and that keep accepts.
func serialRanges(tx store.Tx, spec string, desc bool, keep func([]byte) bool) serialIter {
	elems := []string{spec}
	if strings.Contains(spec, ",") {
		elems = strings.Split(spec, ",")
	}
	var prefixes []string
	for _, e := range elems {
		e = strings.TrimSpace(e)
		if i := strings.IndexByte(e, '*'); i >= 0 {
			e = e[:i]
		}
		prefixes = append(prefixes, caseVariants(e)...)
	}
	slices.Sort(prefixes)
	prefixes = slices.Compact(prefixes)
	// A prefix that another one extends adds nothing; the rest are
	// disjoint ranges in key order.
	var its []*prefixIter
	for i, p := range prefixes {
		if i > 0 && strings.HasPrefix(p, prefixes[i-1]) {
			prefixes[i] = prefixes[i-1]
			continue
		}
		its = append(its, newPrefixIter(tx, bucketSerial, []byte(p), false, desc))
	}
	if desc {
		slices.Reverse(its)
	}
	return &keyFilterIter{its: its, keep: keep}
}

// ---- the plan of one list ----

// source is an ordered walk that answers some of the filters by itself.
type source struct {
	size  int  // the entries of the walk (an upper bound unless exact)
	exact bool // size is the number of distinct tokens it yields
	open  func(desc bool) serialIter
	// has tells whether a serial is in the walk (nil: every token is),
	// by key lookups; cheap: without one (the serial's text).
	has   func(serial []byte) bool
	cheap bool
	// clear removes from a filter the parts the walk answers.
	clear func(f *Filter)
}

// getter is a key lookup in one bucket of a transaction (by one cursor:
// a lookup allocates nothing).
func getter(tx store.Tx, bucket string) func(prefix, serial []byte) bool {
	c := tx.Bucket(bucket).Cursor()
	var buf []byte
	return func(prefix, serial []byte) bool {
		buf = append(append(buf[:0], prefix...), serial...)
		k, _ := c.Seek(buf)
		return bytes.Equal(k, buf)
	}
}

// sources lists the walks that can answer f, in order of preference
// among equal sizes; the last walks every token.
func sources(tx store.Tx, f *Filter) ([]source, error) {
	counts := tx.Bucket(bucketCounts)
	total := readCounter(counts, cntAll)
	var out []source
	if f.UserRealm != "" && f.Resolver != "" && f.UserID != "" {
		prefix := ownerKey(&user.User{Realm: f.UserRealm, Resolver: f.Resolver, UID: f.UserID})
		n := 0
		if err := tx.Bucket(bucketOwner).ForEach(prefix, func(_, _ []byte) error { n++; return nil }); err != nil {
			return nil, err
		}
		get := getter(tx, bucketOwner)
		out = append(out, source{size: n, exact: true,
			open:  func(desc bool) serialIter { return newPrefixIter(tx, bucketOwner, prefix, true, desc) },
			has:   func(serial []byte) bool { return get(prefix, serial) },
			clear: func(f *Filter) { f.UserRealm, f.Resolver, f.UserID = "", "", "" }})
	}
	if m := serialKeyMatcher(f.Serial); m != nil {
		spec := f.Serial
		size := total
		if !strings.Contains(spec, "*") {
			size = strings.Count(spec, ",") + 1
		}
		out = append(out, source{size: size,
			open: func(desc bool) serialIter { return serialRanges(tx, spec, desc, m) },
			has:  m, cheap: true,
			clear: func(f *Filter) { f.Serial = "" }})
	}
	// union of the prefixes of names (from a counter kind) that match.
	multi := func(kind byte, match func(string) bool, bucket string, prefix func(string) []byte, clear func(*Filter)) error {
		vals, err := counterValues(tx, kind)
		if err != nil {
			return err
		}
		var names []string
		n := 0
		for name, c := range vals {
			if match(name) {
				names = append(names, name)
				n += c
			}
		}
		slices.Sort(names)
		prefixes := make([][]byte, len(names))
		for i, name := range names {
			prefixes[i] = prefix(name)
		}
		get := getter(tx, bucket)
		out = append(out, source{size: n, exact: len(names) <= 1 || kind != cntRealm,
			has: func(serial []byte) bool {
				for _, p := range prefixes {
					if get(p, serial) {
						return true
					}
				}
				return false
			},
			open: func(desc bool) serialIter {
				its := make([]serialIter, 0, len(names))
				for _, name := range names {
					its = append(its, newPrefixIter(tx, bucket, prefix(name), true, desc))
				}
				if len(its) == 0 {
					return emptyIter{}
				}
				return union(desc, its...)
			}, clear: clear})
		return nil
	}
	nulPrefix := func(name string) []byte { return []byte(name + "\x00") }
	if f.TokenRealm != "" {
		spec := f.TokenRealm
		if err := multi(cntRealm, func(r string) bool { return listMatch(spec, r) }, bucketRealm, nulPrefix,
			func(f *Filter) { f.TokenRealm = "" }); err != nil {
			return nil, err
		}
	}
	if f.UserRealm != "" {
		realm := strings.ToLower(f.UserRealm)
		if err := multi(cntORealm, func(r string) bool { return r == realm }, bucketORealm, nulPrefix,
			func(f *Filter) { f.UserRealm = "" }); err != nil {
			return nil, err
		}
	}
	if f.Type != "" || len(f.Types) > 0 {
		typ, types := f.Type, f.Types
		match := func(t string) bool {
			return wildMatch(typ, t) && (len(types) == 0 || slices.ContainsFunc(types, func(x string) bool { return strings.EqualFold(x, t) }))
		}
		if err := multi(cntType, match, bucketType, nulPrefix, func(f *Filter) { f.Type, f.Types = "", nil }); err != nil {
			return nil, err
		}
	}
	if f.RolloutState != "" {
		spec := f.RolloutState
		if err := multi(cntRollout, func(r string) bool { return wildMatch(spec, r) }, bucketCol,
			func(r string) []byte { return colKey(colRollout, []byte(colText(r)), "") },
			func(f *Filter) { f.RolloutState = "" }); err != nil {
			return nil, err
		}
	}
	flag := func(b *bool, kind byte, col byte, clear func(*Filter)) {
		if b == nil {
			return
		}
		v := string(b2byte(*b))
		prefix := colKey(col, []byte(v), "")
		get := getter(tx, bucketCol)
		out = append(out, source{size: readCounter(counts, counterKey(kind, v)), exact: true,
			open:  func(desc bool) serialIter { return newPrefixIter(tx, bucketCol, prefix, true, desc) },
			has:   func(serial []byte) bool { return get(prefix, serial) },
			clear: clear})
	}
	flag(f.Assigned, cntAssigned, colAssigned, func(f *Filter) { f.Assigned = nil })
	flag(f.Active, cntActive, colActive, func(f *Filter) { f.Active = nil })
	if f.Visible != nil {
		vis := f.Visible
		n := 0
		for _, v := range vis {
			n += readCounter(counts, counterKey(cntRealm, strings.ToLower(v))) + readCounter(counts, counterKey(cntORealm, strings.ToLower(v)))
		}
		getR, getO := getter(tx, bucketRealm), getter(tx, bucketORealm)
		var prefixes [][]byte
		for _, v := range vis {
			prefixes = append(prefixes, []byte(strings.ToLower(v)+"\x00"))
		}
		out = append(out, source{size: n,
			has: func(serial []byte) bool {
				for _, p := range prefixes {
					if getR(p, serial) || getO(p, serial) {
						return true
					}
				}
				return false
			},
			open: func(desc bool) serialIter {
				var its []serialIter
				for _, v := range vis {
					p := []byte(strings.ToLower(v) + "\x00")
					its = append(its, newPrefixIter(tx, bucketRealm, p, true, desc), newPrefixIter(tx, bucketORealm, p, true, desc))
				}
				if len(its) == 0 {
					return emptyIter{}
				}
				return union(desc, its...)
			}, clear: func(f *Filter) { f.Visible = nil }})
	}
	out = append(out, source{size: total, exact: true,
		open:  func(desc bool) serialIter { return newPrefixIter(tx, bucketSerial, nil, false, desc) },
		clear: func(*Filter) {}})
	return out, nil
}

// isZero reports whether f restricts nothing.
func (f *Filter) isZero() bool {
	return f.Serial == "" && f.Type == "" && len(f.Types) == 0 && f.UserRealm == "" && f.Resolver == "" && f.UserID == "" &&
		f.TokenRealm == "" && f.Description == "" && f.Assigned == nil && f.Active == nil && f.RolloutState == "" &&
		f.InfoKey == "" && f.Visible == nil
}

// checker tests candidates against the filters a walk leaves: the serial
// by its text, the others by the index record, infovalue by decoding.
type checker struct {
	tx       store.Tx
	rest     Filter // without Serial and InfoValue
	serial   func([]byte) bool
	infoKey  string
	infoVal  string
	needAttr bool
	scanned  int
	decoded  int
	scanCap  int
	cap      int
	attrs    map[string]*Token   // kept when the caller sorts by them
	keys     []func([]byte) bool // membership in the other walks
	attrCur  store.Cursor
}

func newChecker(tx store.Tx, rest Filter, listCap int) *checker {
	c := &checker{tx: tx, serial: serialKeyMatcher(rest.Serial), cap: listCap, scanCap: listCap * scanFactor}
	if rest.InfoKey != "" && rest.InfoValue != "" && rest.InfoValue != "*" {
		c.infoKey, c.infoVal = rest.InfoKey, rest.InfoValue
	}
	rest.Serial, rest.InfoValue = "", ""
	c.rest = rest
	c.needAttr = !rest.isZero()
	return c
}

func (c *checker) attr(serial []byte) (*Token, error) {
	if c.attrCur == nil {
		c.attrCur = c.tx.Bucket(bucketAttr).Cursor()
	}
	k, raw := c.attrCur.Seek(serial)
	if !bytes.Equal(k, serial) {
		return nil, nil
	}
	return decodeAttr(string(serial), raw)
}

// ok reports whether serial passes.
func (c *checker) ok(serial []byte) (bool, error) {
	if c.serial != nil && !c.serial(serial) {
		return false, nil
	}
	for _, has := range c.keys {
		if !has(serial) {
			return false, nil
		}
	}
	if c.needAttr || c.attrs != nil {
		c.scanned++
		if c.scanned > c.scanCap {
			return false, errTooBroad("this filter", c.scanCap)
		}
		a, err := c.attr(serial)
		if err != nil || a == nil || !c.rest.match(a) {
			return false, err
		}
		if c.attrs != nil {
			c.attrs[a.Serial] = a
		}
	}
	if c.infoKey != "" {
		c.decoded++
		if c.decoded > c.cap {
			return false, errTooBroad("the filter infovalue", c.cap)
		}
		t, err := loadUncached(c.tx, string(serial))
		if err != nil || t == nil {
			return false, err
		}
		v, ok := t.Info[c.infoKey]
		return ok && wildMatch(c.infoVal, v), nil
	}
	return true, nil
}

// List returns one page of the tokens matching f, sorted by sortBy
// (default serial; ties by serial) and desc. page is 1-based; pageSize <= 0
// returns everything on one page (at most DefaultListCap tokens).
//
// It walks an index in the order of the answer and decodes only the
// records of the page. Counts come from counters kept with the indexes
// when one index answers every filter, and otherwise from walking the
// most selective index and checking its candidates by their index records
// (bounded; infovalue decodes, at most DefaultListCap records). A sort by
// count or failcount (which every authentication changes, so no index
// keeps them) decodes and sorts the candidates, at most DefaultListCap.
func (s *Service) List(ctx context.Context, f Filter, sortBy string, desc bool, page, pageSize int) (Page, error) {
	if sortBy == "tokentype" {
		sortBy = "type"
	}
	if sortBy == "" {
		sortBy = "serial"
	}
	if !slices.Contains(SortColumns, sortBy) {
		return Page{}, apierr.New(apierr.Parameter, "sortby must be one of "+strings.Join(SortColumns, ", "))
	}
	if err := s.ensureIndexes(ctx); err != nil {
		return Page{}, err
	}
	listCap := s.listCap
	all := pageSize <= 0
	if all {
		pageSize = listCap
	}
	if pageSize > listCap {
		return Page{}, apierr.New(apierr.Parameter, fmt.Sprintf("pagesize must be at most %d", listCap))
	}
	page = max(page, 1)
	start := math.MaxInt - pageSize
	if all {
		start = 0
	} else if page-1 <= (math.MaxInt-pageSize)/pageSize {
		start = (page - 1) * pageSize
	}
	var p Page
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		var serials []string
		var count int
		var err error
		if sortBy == "serial" {
			serials, count, err = s.listBySerial(tx, &f, desc, start, pageSize)
		} else {
			serials, count, err = s.listByColumn(tx, &f, sortBy, desc, start, pageSize)
		}
		if err != nil {
			return err
		}
		if all && count > listCap {
			return errTooBroad("a list on one page", listCap)
		}
		p = Page{Count: count, Page: page, Tokens: make([]*Token, 0, len(serials))}
		for _, serial := range serials {
			t, err := loadUncached(tx, serial)
			if err != nil {
				return err
			}
			if t != nil {
				p.Tokens = append(p.Tokens, t)
			}
		}
		return nil
	})
	if err != nil {
		return Page{}, err
	}
	if all {
		return p, nil
	}
	if p.Page > 1 {
		p.Prev = p.Page - 1
	}
	if start+pageSize < p.Count {
		p.Next = p.Page + 1
	}
	return p, nil
}

// checkerFor is the checker of the filters that walk skip (-1: none)
// leaves: the other walks by key lookups, the rest by index records.
func checkerFor(tx store.Tx, srcs []source, skip int, f Filter, listCap int) *checker {
	rest := f
	var keys []func([]byte) bool
	if skip >= 0 {
		srcs[skip].clear(&rest)
	}
	for i, o := range srcs {
		if i == skip || o.has == nil {
			continue
		}
		keys = append(keys, o.has)
		o.clear(&rest)
	}
	c := newChecker(tx, rest, listCap)
	c.keys = keys
	return c
}

// plan picks the walk that costs least: a walk that answers every filter
// by itself costs nothing beyond the page; otherwise each entry costs a
// step, a key lookup per other filter and, when a filter needs the index
// record, a record read.
func plan(tx store.Tx, srcs []source, f Filter, listCap int) (source, *checker, int) {
	bestI, bestCost := 0, math.MaxInt
	for i, w := range srcs {
		c := checkerFor(tx, srcs, i, f, listCap)
		perEntry := 1
		for j, o := range srcs {
			if j != i && o.has != nil && !o.cheap {
				perEntry += 2
			}
		}
		if c.needAttr || c.infoKey != "" {
			perEntry += 20
		}
		cost := w.size * perEntry
		if w.exact && perEntry == 1 && c.serial == nil && len(c.keys) == 0 {
			cost = 0
		}
		if cost < bestCost {
			bestI, bestCost = i, cost
		}
	}
	return srcs[bestI], checkerFor(tx, srcs, bestI, f, listCap), bestCost
}

// listBySerial answers a list in serial order: the serials of the page
// and the count.
func (s *Service) listBySerial(tx store.Tx, f *Filter, desc bool, start, size int) ([]string, int, error) {
	srcs, err := sources(tx, f)
	if err != nil {
		return nil, 0, err
	}
	src, c, work := plan(tx, srcs, *f, s.listCap)
	trivial := src.exact && c.serial == nil && len(c.keys) == 0 && !c.needAttr && c.infoKey == ""
	if trivial {
		// The walk to the page from its nearer end.
		work = min(start, max(src.size-start-size, 0))
	}
	if work > s.setMinWork && setAnswers(f) {
		if ls := s.currentListSet(tx); ls != nil {
			defer s.releaseSet(ls)
			return s.listFromSet(tx, ls, f, desc, start, size)
		}
	}
	if trivial {
		// The walk is the answer: its size is the count, and the page is
		// reached from the nearer end.
		count := src.size
		if start >= count {
			return []string{}, count, nil
		}
		end := min(start+size, count)
		if start <= count-end {
			return take(src.open(desc), start, end-start), count, nil
		}
		out := take(src.open(!desc), count-end, end-start)
		slices.Reverse(out)
		return out, count, nil
	}
	if c.needAttr && src.size > c.scanCap {
		return nil, 0, errTooBroad("this filter", c.scanCap)
	}
	it := src.open(desc)
	out := []string{}
	count := 0
	for serial, ok := it.next(); ok; serial, ok = it.next() {
		pass, err := c.ok(serial)
		if err != nil {
			return nil, 0, err
		}
		if !pass {
			continue
		}
		if count >= start && count-start < size {
			out = append(out, string(serial))
		}
		count++
	}
	return out, count, nil
}

// listFromSet answers a list in serial order from the list set: the
// filters the set keeps by its codes, the rest (description, resolver,
// uid, infokey) by the index records of the set's matches (bounded like a
// walk).
func (s *Service) listFromSet(tx store.Tx, ls *listSet, f *Filter, desc bool, start, size int) ([]string, int, error) {
	rest := *f
	q := newSetQuery(ls, *f, &rest)
	if rest.isZero() {
		out, count := q.page(desc, start, size)
		return out, count, nil
	}
	c := newChecker(tx, rest, s.listCap)
	var pass []int32
	var key []byte
	var err error
	q.each(func(i int) bool {
		key = ls.appendSerial(key[:0], i)
		var ok bool
		if ok, err = c.ok(key); ok {
			pass = append(pass, int32(i))
		}
		return err == nil
	})
	if err != nil {
		return nil, 0, err
	}
	count := len(pass)
	out := []string{}
	for k := start; k < count && k-start < size; k++ {
		i := k
		if desc {
			i = count - 1 - k
		}
		out = append(out, ls.serial(int(pass[i])))
	}
	return out, count, nil
}

// take skips n serials of it and returns the next k.
func take(it serialIter, n, k int) []string {
	for range n {
		if _, ok := it.next(); !ok {
			return []string{}
		}
	}
	out := make([]string, 0, k)
	for len(out) < k {
		s, ok := it.next()
		if !ok {
			break
		}
		out = append(out, string(s))
	}
	return out
}

// columnWalk is the ordered walk of a sort column's index (ties by
// serial), or nil for a column no index keeps.
func columnWalk(tx store.Tx, col string, desc bool) serialIter {
	var it *prefixIter
	switch col {
	case "type":
		it = newPrefixIter(tx, bucketType, nil, false, desc)
	case "description":
		it = newPrefixIter(tx, bucketCol, []byte{colDescription}, false, desc)
	case "active":
		it = newPrefixIter(tx, bucketCol, []byte{colActive}, false, desc)
	case "otplen":
		it = newPrefixIter(tx, bucketCol, []byte{colOTPLen}, false, desc)
	case "maxfail":
		it = newPrefixIter(tx, bucketCol, []byte{colMaxFail}, false, desc)
	case "rollout_state":
		it = newPrefixIter(tx, bucketCol, []byte{colRollout}, false, desc)
	case "id":
		it = newPrefixIter(tx, bucketCol, []byte{colID}, false, desc)
	default:
		return nil
	}
	it.lastNul = true
	return it
}

// listByColumn answers a list sorted by another column than the serial.
func (s *Service) listByColumn(tx store.Tx, f *Filter, col string, desc bool, start, size int) ([]string, int, error) {
	srcs, err := sources(tx, f)
	if err != nil {
		return nil, 0, err
	}
	src, c, _ := plan(tx, srcs, *f, s.listCap)
	if src.size <= s.listCap || col == "count" || col == "failcount" {
		return s.sortCandidates(tx, src, c, col, desc, start, size)
	}
	// Many candidates: walk the column's index in order and check each
	// against every filter.
	c = checkerFor(tx, srcs, -1, *f, s.listCap)
	total := readCounter(tx.Bucket(bucketCounts), cntAll)
	if c.serial == nil && len(c.keys) == 0 && !c.needAttr && c.infoKey == "" {
		if start >= total {
			return []string{}, total, nil
		}
		end := min(start+size, total)
		if start <= total-end {
			return take(columnWalk(tx, col, desc), start, end-start), total, nil
		}
		out := take(columnWalk(tx, col, !desc), total-end, end-start)
		slices.Reverse(out)
		return out, total, nil
	}
	if total > c.scanCap {
		return nil, 0, errTooBroad("sortby "+col+" with this filter", c.scanCap)
	}
	it := columnWalk(tx, col, desc)
	out := []string{}
	count := 0
	for serial, ok := it.next(); ok; serial, ok = it.next() {
		pass, err := c.ok(serial)
		if err != nil {
			return nil, 0, err
		}
		if pass {
			if count >= start && count-start < size {
				out = append(out, string(serial))
			}
			count++
		}
	}
	return out, count, nil
}

// sortCandidates collects the candidates of src that c passes (at most the
// list cap), sorts them by col and cuts the page.
func (s *Service) sortCandidates(tx store.Tx, src source, c *checker, col string, desc bool, start, size int) ([]string, int, error) {
	what := "sortby " + col
	if src.size > s.listCap && (col == "count" || col == "failcount") {
		return nil, 0, errTooBroad(what, s.listCap)
	}
	c.attrs = map[string]*Token{}
	var cands []*Token
	it := src.open(false)
	for serial, ok := it.next(); ok; serial, ok = it.next() {
		pass, err := c.ok(serial)
		if err != nil {
			return nil, 0, err
		}
		if !pass {
			continue
		}
		if len(cands) == s.listCap {
			return nil, 0, errTooBroad(what, s.listCap)
		}
		t := c.attrs[string(serial)]
		if col == "count" || col == "failcount" {
			if t, err = loadUncached(tx, string(serial)); err != nil {
				return nil, 0, err
			}
		}
		if t != nil {
			cands = append(cands, t)
		}
	}
	less := sortKey(col)
	sort.SliceStable(cands, func(i, j int) bool {
		c := less(cands[i], cands[j])
		if c == 0 {
			c = cmp.Compare(cands[i].Serial, cands[j].Serial)
		}
		if desc {
			return c > 0
		}
		return c < 0
	})
	out := []string{}
	for i := start; i < len(cands) && i-start < size; i++ {
		out = append(out, cands[i].Serial)
	}
	return out, len(cands), nil
}

// ensureIndexes builds the list indexes when the data file lacks them
// (BuildIndexes; the server builds them at start, so this only runs for a
// Service used without it). Once complete they stay complete: saves keep
// them.
func (s *Service) ensureIndexes(ctx context.Context) error {
	if s.indexed.Load() {
		return nil
	}
	ok, err := s.IndexesReady(ctx)
	if err == nil && !ok {
		err = s.BuildIndexes(ctx, nil)
	}
	if err == nil {
		s.indexed.Store(true)
	}
	return err
}
