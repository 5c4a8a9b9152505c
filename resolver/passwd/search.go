package passwd

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/resolver"
)

// pattern is a compiled text search value: case-insensitive, with * only
// meaningful at the start and/or end (admin-config 3.1); a * elsewhere is
// a literal and the whole value must then match exactly.
type pattern struct {
	all    bool
	prefix bool   // the value ended with *: match a prefix
	suffix bool   // the value started with *: match a suffix
	text   string // lower-cased
}

func compilePattern(v string) pattern {
	if v == "" {
		return pattern{all: true}
	}
	core := v
	lead := strings.HasPrefix(core, "*")
	if lead {
		core = core[1:]
	}
	trail := strings.HasSuffix(core, "*")
	if trail {
		core = core[:len(core)-1]
	}
	if strings.Contains(core, "*") {
		return pattern{text: strings.ToLower(v)}
	}
	if core == "" {
		return pattern{all: true}
	}
	return pattern{prefix: trail, suffix: lead, text: strings.ToLower(core)}
}

func (p pattern) match(s string) bool {
	if p.all {
		return true
	}
	s = strings.ToLower(s)
	switch {
	case p.prefix && p.suffix:
		return strings.Contains(s, p.text)
	case p.prefix:
		return strings.HasPrefix(s, p.text)
	case p.suffix:
		return strings.HasSuffix(s, p.text)
	}
	return s == p.text
}

// uidRange is a compiled userid search: =N, >N, >=N, <N, <=N, a bare N,
// "between A,B" (inclusive), or * / empty for all. A value that does not
// parse matches nobody.
type uidRange struct {
	lo, hi uint64 // inclusive
}

func compileRange(v string) uidRange {
	v = strings.TrimSpace(v)
	all := uidRange{0, 1<<32 - 1}
	none := uidRange{1, 0}
	if v == "" || v == "*" {
		return all
	}
	num := func(s string) (uint64, bool) {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
		return n, err == nil
	}
	if rest, ok := cutPrefixFold(v, "between"); ok {
		a, b, ok := strings.Cut(rest, ",")
		lo, ok1 := num(a)
		hi, ok2 := num(b)
		if !ok || !ok1 || !ok2 {
			return none
		}
		return uidRange{lo, hi}
	}
	for _, op := range []string{">=", "<=", ">", "<", "="} {
		rest, ok := strings.CutPrefix(v, op)
		if !ok {
			continue
		}
		n, ok := num(rest)
		if !ok {
			return none
		}
		switch op {
		case ">=":
			return uidRange{n, all.hi}
		case "<=":
			return uidRange{0, n}
		case ">":
			if n == all.hi {
				return none
			}
			return uidRange{n + 1, all.hi}
		case "<":
			if n == 0 {
				return none
			}
			return uidRange{0, n - 1}
		}
		return uidRange{n, n}
	}
	if n, ok := num(v); ok {
		return uidRange{n, n}
	}
	return none
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

func (r uidRange) match(n uint32) bool { return uint64(n) >= r.lo && uint64(n) <= r.hi }

// matcher is a compiled filter: every condition must hold.
type matcher struct {
	username, description, email *pattern
	userid                       *uidRange
}

// compileFilter accepts username, description, email and userid; any other
// key is resolver.ErrSearchKey (privacyIDEA returns no users; our
// interface lets callers skip the store instead).
func compileFilter(filter map[string]string) (matcher, error) {
	var m matcher
	for k, v := range filter {
		switch k {
		case resolver.KeyUsername:
			p := compilePattern(v)
			m.username = &p
		case resolver.KeyDescription:
			p := compilePattern(v)
			m.description = &p
		case resolver.KeyEmail:
			p := compilePattern(v)
			m.email = &p
		case resolver.KeyUserID:
			r := compileRange(v)
			m.userid = &r
		default:
			return matcher{}, fmt.Errorf("passwd: search by %q: %w", k, resolver.ErrSearchKey)
		}
	}
	return m, nil
}

func (m *matcher) match(e *entry) bool {
	return (m.username == nil || m.username.match(e.login)) &&
		(m.description == nil || m.description.match(e.gecos)) &&
		(m.email == nil || m.email.match(e.email)) &&
		(m.userid == nil || m.userid.match(e.uidNum))
}

// matchID is match on entry id of s, cutting only the fields it needs.
func (m *matcher) matchID(s *snapshot, id uint32) bool {
	return (m.username == nil || m.username.match(s.login(id))) &&
		(m.description == nil || m.description.match(s.gecos(id))) &&
		(m.email == nil || m.email.match(s.email(id))) &&
		(m.userid == nil || m.userid.match(s.uidNum(id)))
}

// conditions counts the filter's conditions.
func (m *matcher) conditions() int {
	n := 0
	for _, set := range []bool{m.username != nil, m.description != nil, m.email != nil, m.userid != nil} {
		if set {
			n++
		}
	}
	return n
}

// indexed reports whether p can be answered from a sorted index: an exact
// value or a prefix (value*), not a suffix or infix search.
func (p *pattern) indexed() bool { return p != nil && !p.all && !p.suffix }

// candidates returns the entry ids an index says may match m, in file
// order, or all=true when no condition narrows the search and every
// entry must be looked at.
func (m *matcher) candidates(s *snapshot) (ids []uint32, all bool) {
	best := -1
	var bestIdx []uint32
	consider := func(idx []uint32, lo, hi int) {
		if best < 0 || hi-lo < best {
			best, bestIdx = hi-lo, idx[lo:hi]
		}
	}
	if p := m.username; p.indexed() {
		lo, hi := s.loginRange(p.text, p.prefix)
		consider(s.byLogin, lo, hi)
	}
	if p := m.description; p.indexed() {
		lo, hi := foldRange(s.byDesc, s.gecos, p.text, p.prefix)
		consider(s.byDesc, lo, hi)
	}
	if p := m.email; p.indexed() {
		lo, hi := foldRange(s.byEmail, s.email, p.text, p.prefix)
		consider(s.byEmail, lo, hi)
	}
	if r := m.userid; r != nil && (r.lo > 0 || r.hi < 1<<32-1) {
		lo, hi := s.uidRange(r.lo, r.hi)
		consider(s.byUID, lo, hi)
	}
	if best < 0 {
		return nil, true
	}
	return fileOrder(bestIdx, s.count()), false
}

// sortMax is the most ids fileOrder sorts (tests lower it).
var sortMax = 2048

// fileOrder returns ids (a span of an index) in ascending order: sorted
// when few, else through a bitmap over all n entries (n/8 bytes, cheaper
// than sorting from a couple of thousand ids on).
func fileOrder(ids []uint32, n int) []uint32 {
	out := make([]uint32, 0, len(ids))
	if len(ids) <= sortMax {
		out = append(out, ids...)
		slices.Sort(out)
		return out
	}
	set := make([]uint64, (n+63)/64)
	for _, id := range ids {
		set[id/64] |= 1 << (id % 64)
	}
	for w, b := range set {
		for b != 0 {
			i := bits.TrailingZeros64(b)
			out = append(out, uint32(w*64+i))
			b &= b - 1
		}
	}
	return out
}

// page lists the matches of m in file order, skipping offset and at most
// limit of them. Total is known when the search ran to the end of its
// candidates.
func (m *matcher) page(ctx context.Context, s *snapshot, offset, limit int) (resolver.Page, error) {
	p := resolver.Page{Total: -1}
	ids, all := m.candidates(s)
	if !all && m.conditions() == 1 {
		// The one condition came from its index: every candidate matches.
		p.Total = len(ids)
		for _, id := range ids[min(offset, len(ids)):min(offset+limit, len(ids))] {
			e := s.entry(id)
			p.Users = append(p.Users, e.info())
		}
		p.More = offset+limit < len(ids)
		return p, nil
	}
	n := len(ids)
	if all {
		n = s.count()
	}
	// Without a condition every entry matches: the page is a slice.
	if all && m.username == nil && m.description == nil && m.email == nil && m.userid == nil {
		p.Total = n
		for id := offset; id < n && id-offset < limit; id++ {
			e := s.entry(uint32(id))
			p.Users = append(p.Users, e.info())
		}
		p.More = offset+limit < n
		return p, nil
	}
	matched := 0
	for i := range n {
		if i&4095 == 4095 {
			if err := ctx.Err(); err != nil {
				return resolver.Page{}, err
			}
		}
		id := uint32(i)
		if !all {
			id = ids[i]
		}
		if !m.matchID(s, id) {
			continue
		}
		matched++
		switch {
		case matched <= offset:
		case matched <= offset+limit:
			e := s.entry(id)
			p.Users = append(p.Users, e.info())
		default:
			p.More = true
			if all {
				return p, nil // counting the rest would read every entry
			}
		}
	}
	p.Total = matched
	return p, nil
}
