package ldap

import (
	"encoding/hex"
	"strings"

	goldap "github.com/go-ldap/ldap/v3"
)

// andFilter joins the configured search filter (a sequence of components)
// with more components.
func andFilter(base string, parts ...string) string {
	return "(&" + base + strings.Join(parts, "") + ")"
}

// anyOf returns the component, or an OR of the components when there are
// several.
func anyOf(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return "(|" + strings.Join(parts, "") + ")"
}

// equalityFilter matches value literally in any of attrs. Every byte that
// has a meaning in a filter (and every byte >= 0x80) is escaped.
func equalityFilter(attrs []string, value string) string {
	v := goldap.EscapeFilter(value)
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		parts[i] = "(" + a + "=" + v + ")"
	}
	return anyOf(parts)
}

// collapseStars replaces runs of "*" by one.
func collapseStars(v string) string {
	if !strings.Contains(v, "**") {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	star := false
	for i := 0; i < len(v); i++ {
		if v[i] == '*' {
			if star {
				continue
			}
			star = true
		} else {
			star = false
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// matchesAll reports whether a search value puts no condition: empty or
// only "*".
func matchesAll(v string) bool { return strings.Trim(v, "*") == "" }

// searchFilter matches value, where "*" is a wildcard, in any of attrs:
// each piece between stars is escaped and the pieces are joined with "*".
// ok is false when the value matches everything (see matchesAll); the
// caller then adds no component.
func searchFilter(attrs []string, value string) (filter string, ok bool) {
	if matchesAll(value) {
		return "", false
	}
	value = collapseStars(value)
	if !strings.Contains(value, "*") {
		return equalityFilter(attrs, value), true
	}
	pieces := strings.Split(value, "*")
	for i, p := range pieces {
		pieces[i] = goldap.EscapeFilter(p)
	}
	v := strings.Join(pieces, "*")
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		parts[i] = "(" + a + "=" + v + ")"
	}
	return anyOf(parts), true
}

// escapeBytes escapes every byte of b as \xx, for binary assertion
// values such as objectGUID.
func escapeBytes(b []byte) string {
	var sb strings.Builder
	sb.Grow(3 * len(b))
	for _, c := range b {
		sb.WriteByte('\\')
		sb.WriteString(hex.EncodeToString([]byte{c}))
	}
	return sb.String()
}

// globMatch reports whether value matches pattern, where "*" is a
// wildcard, ignoring case. It re-checks what the directory matched: LDAP
// matching rules also fold spaces, which must not make "alice " a login
// of alice.
func globMatch(pattern, value string) bool {
	pattern, value = strings.ToLower(collapseStars(pattern)), strings.ToLower(value)
	pieces := strings.Split(pattern, "*")
	if len(pieces) == 1 {
		return pattern == value
	}
	if !strings.HasPrefix(value, pieces[0]) {
		return false
	}
	value = value[len(pieces[0]):]
	last := pieces[len(pieces)-1]
	for _, p := range pieces[1 : len(pieces)-1] {
		i := strings.Index(value, p)
		if i < 0 {
			return false
		}
		value = value[i+len(p):]
	}
	return len(value) >= len(last) && strings.HasSuffix(value, last)
}
