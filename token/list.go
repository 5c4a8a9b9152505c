package token

import (
	"cmp"
	"slices"
	"strings"
)

// Filter selects tokens for List. Empty fields do not restrict. Text
// filters take "*" wildcards; Serial and TokenRealm also take comma lists
// of exact values.
type Filter struct {
	Serial       string
	Type         string
	Types        []string
	UserRealm    string // owner's realm
	Resolver     string // owner's resolver
	UserID       string // owner's uid
	TokenRealm   string
	Description  string
	Assigned     *bool
	Active       *bool
	RolloutState string
	InfoKey      string
	InfoValue    string
	// Visible restricts to tokens in one of these realms (by token realm
	// or owner realm); nil means no restriction.
	Visible []string
}

// Page is one page of a list.
type Page struct {
	Tokens []*Token
	Count  int
	Prev   int // 0 = none
	Next   int // 0 = none
	Page   int
}

// wildMatch matches s against a pattern whose '*' matches any run of
// characters, case-insensitively; "" and "*" match everything.
func wildMatch(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	if !strings.Contains(pattern, "*") {
		return strings.EqualFold(pattern, s)
	}
	return globMatch(strings.Split(strings.ToLower(pattern), "*"), strings.ToLower(s))
}

// globMatch matches s against the parts of a pattern split at its '*'
// (parts has at least two elements; both are lower case).
func globMatch(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}

func listMatch(spec, s string) bool {
	if spec == "" {
		return true
	}
	if strings.Contains(spec, ",") {
		for _, p := range strings.Split(spec, ",") {
			if wildMatch(strings.TrimSpace(p), s) {
				return true
			}
		}
		return false
	}
	return wildMatch(spec, s)
}

func (f *Filter) match(t *Token) bool {
	if !listMatch(f.Serial, t.Serial) || !wildMatch(f.Type, t.Type) {
		return false
	}
	if len(f.Types) > 0 && !slices.ContainsFunc(f.Types, func(x string) bool { return strings.EqualFold(x, t.Type) }) {
		return false
	}
	owner := t.Owner
	if f.UserRealm != "" && (owner == nil || !strings.EqualFold(owner.Realm, f.UserRealm)) {
		return false
	}
	if f.Resolver != "" && (owner == nil || owner.Resolver != f.Resolver) {
		return false
	}
	if f.UserID != "" && (owner == nil || owner.UID != f.UserID) {
		return false
	}
	if f.TokenRealm != "" && !slices.ContainsFunc(t.Realms, func(r string) bool { return listMatch(f.TokenRealm, r) }) {
		return false
	}
	if f.Description != "" && !wildMatch(f.Description, t.Description) {
		return false
	}
	if f.Assigned != nil && t.Assigned() != *f.Assigned {
		return false
	}
	if f.Active != nil && t.Active != *f.Active {
		return false
	}
	if f.RolloutState != "" && !wildMatch(f.RolloutState, t.RolloutState) {
		return false
	}
	if f.InfoKey != "" {
		v, ok := t.Info[f.InfoKey]
		if !ok || (f.InfoValue != "" && !wildMatch(f.InfoValue, v)) {
			return false
		}
	}
	if f.Visible != nil {
		ok := slices.ContainsFunc(t.Realms, func(r string) bool {
			return slices.ContainsFunc(f.Visible, func(v string) bool { return strings.EqualFold(v, r) })
		})
		if !ok && owner != nil {
			ok = slices.ContainsFunc(f.Visible, func(v string) bool { return strings.EqualFold(v, owner.Realm) })
		}
		if !ok {
			return false
		}
	}
	return true
}

// sortKey compares two tokens by a column.
func sortKey(col string) func(a, b *Token) int {
	switch col {
	case "id":
		return func(a, b *Token) int { return cmp.Compare(a.ID, b.ID) }
	case "tokentype", "type":
		return func(a, b *Token) int { return cmp.Compare(a.Type, b.Type) }
	case "description":
		return func(a, b *Token) int { return cmp.Compare(a.Description, b.Description) }
	case "active":
		return func(a, b *Token) int { return cmp.Compare(b2i(a.Active), b2i(b.Active)) }
	case "failcount":
		return func(a, b *Token) int { return cmp.Compare(a.FailCount, b.FailCount) }
	case "count":
		return func(a, b *Token) int { return cmp.Compare(a.Count, b.Count) }
	case "maxfail":
		return func(a, b *Token) int { return cmp.Compare(a.MaxFail, b.MaxFail) }
	case "otplen":
		return func(a, b *Token) int { return cmp.Compare(a.OTPLen, b.OTPLen) }
	case "rollout_state":
		return func(a, b *Token) int { return cmp.Compare(a.RolloutState, b.RolloutState) }
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
