package passwd

import (
	"fmt"
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
