package token

import (
	"cmp"
	"context"
	"path"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/store"
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

func wildMatch(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	if !strings.Contains(pattern, "*") {
		return strings.EqualFold(pattern, s)
	}
	// path.Match treats '*' like our wildcard; escape the rest.
	var b strings.Builder
	for _, r := range pattern {
		switch r {
		case '?', '[', ']', '\\':
			b.WriteRune('\\')
		}
		b.WriteRune(r)
	}
	ok, err := path.Match(strings.ToLower(b.String()), strings.ToLower(strings.ReplaceAll(s, "/", "\x00")))
	return err == nil && ok
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

// SortColumns are the columns List sorts by.
var SortColumns = []string{"serial", "id", "tokentype", "type", "description", "active", "failcount", "count", "maxfail", "otplen", "rollout_state"}

// List returns one page of the tokens matching f, sorted by sortBy
// (default serial; ties by serial) and desc. page is 1-based; pageSize <= 0
// returns everything on one page.
func (s *Service) List(ctx context.Context, f Filter, sortBy string, desc bool, page, pageSize int) (Page, error) {
	var all []*Token
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		all = all[:0]
		visit := func(serial string) error {
			t, err := s.load(tx, serial)
			if err != nil || t == nil {
				return err
			}
			if f.match(t) {
				all = append(all, t)
			}
			return nil
		}
		// Narrow by an index when an exact owner is asked for.
		if f.UserRealm != "" && f.Resolver != "" && f.UserID != "" {
			prefix := []byte(strings.ToLower(f.UserRealm) + "\x00" + f.Resolver + "\x00" + f.UserID + "\x00")
			return tx.Bucket(bucketOwner).ForEach(prefix, func(k, _ []byte) error { return visit(string(k[len(prefix):])) })
		}
		return tx.Bucket(bucketTokens).ForEach(nil, func(k, _ []byte) error { return visit(string(k)) })
	})
	if err != nil {
		return Page{}, err
	}
	bySerial := func(a, b *Token) int { return cmp.Compare(a.Serial, b.Serial) }
	less := sortKey(sortBy)
	slices.SortStableFunc(all, func(a, b *Token) int {
		c := 0
		if less != nil {
			c = less(a, b)
		}
		if c == 0 {
			c = bySerial(a, b)
		}
		if desc {
			return -c
		}
		return c
	})
	p := Page{Count: len(all), Page: max(page, 1)}
	if pageSize <= 0 {
		p.Tokens = all
		return p, nil
	}
	start := (p.Page - 1) * pageSize
	if start < len(all) {
		p.Tokens = all[start:min(start+pageSize, len(all))]
	} else {
		p.Tokens = []*Token{}
	}
	if p.Page > 1 {
		p.Prev = p.Page - 1
	}
	if start+pageSize < len(all) {
		p.Next = p.Page + 1
	}
	return p, nil
}
