package policy

import (
	"maps"
	"slices"
	"strings"
	"unicode"
)

// Action strings (admin-config 1.2): a policy's actions as privacyIDEA
// writes them, "key, key=value, ...", read and written here.

// iniAction is one item of an action string: a bare key (val true) or
// key=value (val a string).
type iniAction struct {
	key string
	val any
}

// iniIsSpace is Python's str.isspace, which str.strip uses.
func iniIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// iniActionItem reads one comma-separated part: stripped, split at the
// first '='. An empty part gives ok false.
func iniActionItem(part string) (a iniAction, ok bool) {
	part = strings.TrimFunc(part, iniIsSpace)
	if part == "" {
		return a, false
	}
	if k, v, found := strings.Cut(part, "="); found {
		return iniAction{k, v}, true
	}
	return iniAction{part, true}, true
}

// iniActionItems splits an action string in order, keeping duplicates.
func iniActionItems(s string) []iniAction {
	var out []iniAction
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && (s[i] != ',' || (i > 0 && s[i-1] == '\\')) {
			continue
		}
		if a, ok := iniActionItem(s[start:i]); ok {
			out = append(out, a)
		}
		start = i + 1
	}
	return out
}

// iniActionsOrdered is iniActionItems with dict semantics: one entry per
// key at its first position, holding the last value (as a Python dict
// built from the string would).
func iniActionsOrdered(s string) []iniAction {
	items := iniActionItems(s)
	pos := map[string]int{}
	var out []iniAction
	for _, a := range items {
		if i, ok := pos[a.key]; ok {
			out[i].val = a.val
			continue
		}
		pos[a.key] = len(out)
		out = append(out, a)
	}
	return out
}

// ParseActions parses an action string as privacyIDEA does: split on
// commas not preceded by a backslash, strip each part, split it at the
// first '='. A bare key maps to true, key=value to the string value (a
// "\," inside it stays as written). Empty parts are skipped; a repeated
// key keeps its last value.
func ParseActions(s string) map[string]any {
	out := map[string]any{}
	for _, a := range iniActionItems(s) {
		out[a.key] = a.val
	}
	return out
}

// FormatActions writes an action map back as an action string that
// ParseActions reads as the same map. Keys come out sorted; true gives a
// bare key, any other value key=value, with non-strings written as Python
// would print them (False, None, 8, ['a']). A comma not preceded by a
// backslash is written \, . Entries that cannot survive parsing as given
// are normalised the way ParseActions would read them: surrounding blanks
// are dropped and a key holding '=' is split there.
func FormatActions(m map[string]any) string {
	norm := make(map[string]any, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		text := k
		if b, ok := m[k].(bool); !ok || !b {
			text += "=" + pyStr(m[k])
		}
		if a, ok := iniActionItem(iniEscapeCommas(text)); ok {
			norm[a.key] = a.val
		}
	}
	var b strings.Builder
	prev := ""
	for i, k := range slices.Sorted(maps.Keys(norm)) {
		if i > 0 {
			// A part ending in a backslash would escape the separator.
			if strings.HasSuffix(prev, `\`) {
				b.WriteString(" , ")
			} else {
				b.WriteString(", ")
			}
		}
		prev = k
		if s, ok := norm[k].(string); ok {
			prev = k + "=" + s
		}
		b.WriteString(prev)
	}
	return b.String()
}

// iniEscapeCommas writes every comma not preceded by a backslash as \, .
func iniEscapeCommas(s string) string {
	if !strings.Contains(s, ",") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && (i == 0 || s[i-1] != '\\') {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
