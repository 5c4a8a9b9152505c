package resolver_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/resolver"
)

// listStore lists fixed logins in order; it searches by username (exact,
// or a prefix with a trailing *). paged chooses whether it implements
// Pager or leaves SearchPage to cut Search's list; broken fails every
// search.
type listStore struct {
	logins []string
	broken bool
}

type pagedStore struct{ *listStore }

func (s *listStore) UserID(context.Context, string) (string, error) { return "", resolver.ErrNoUser }
func (s *listStore) User(context.Context, string) (resolver.Info, error) {
	return nil, resolver.ErrNoUser
}
func (s *listStore) CheckPassword(context.Context, string, string) (bool, error) {
	return false, nil
}
func (s *listStore) Close() error { return nil }

func (s *listStore) Search(ctx context.Context, filter map[string]string) ([]resolver.Info, error) {
	if s.broken {
		return nil, resolver.ErrUnavailable
	}
	var out []resolver.Info
	for k := range filter {
		if k != resolver.KeyUsername {
			return nil, resolver.ErrSearchKey
		}
	}
	pat := filter[resolver.KeyUsername]
	for _, l := range s.logins {
		if p, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(l, p) || pat == "" || l == pat {
			out = append(out, resolver.Info{resolver.KeyUsername: l, resolver.KeyUserID: l})
		}
	}
	return out, nil
}

func (s pagedStore) SearchPage(ctx context.Context, filter map[string]string, offset, limit int) (resolver.Page, error) {
	if len(filter) == 0 && !s.broken {
		// Without a filter the page is a slice of the logins.
		var page []resolver.Info
		for _, l := range s.logins[min(offset, len(s.logins)):min(offset+limit, len(s.logins))] {
			page = append(page, resolver.Info{resolver.KeyUsername: l, resolver.KeyUserID: l})
		}
		return resolver.Page{Users: page, More: offset+limit < len(s.logins), Total: len(s.logins)}, nil
	}
	all, err := s.Search(ctx, filter)
	if err != nil {
		return resolver.Page{}, err
	}
	p := resolver.CutPage(all, offset, limit)
	if p.More {
		p.Total = -1 // as stores that cannot count cheaply
	}
	return p, nil
}

// reference is the unpaged listing: per group every source's whole
// search, a login once per group, failing sources skipped.
func reference(groups [][]resolver.Resolver, filter map[string]string) []string {
	var out []string
	for g, srcs := range groups {
		seen := map[string]bool{}
		for _, s := range srcs {
			list, err := s.Search(context.Background(), filter)
			if err != nil {
				continue
			}
			for _, u := range list {
				if l := u.String(resolver.KeyUsername); !seen[l] {
					seen[l] = true
					out = append(out, fmt.Sprintf("%d/%s", g, l))
				}
			}
		}
	}
	return out
}

// TestMergedPage: the pages of MergedPage, at every page size and offset,
// are the slices of the unpaged listing (realm and priority order, a
// login once per realm with the first source winning, failing sources
// skipped), and More says whether the listing goes on.
func TestMergedPage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []string{"al", "alice", "amy", "bob", "ann", "carl", "abe", "zed", "aa", "ab", "ac", "ad"}
	for round := range 40 {
		var groups [][]resolver.Resolver
		for range 1 + rng.IntN(3) {
			var srcs []resolver.Resolver
			for range 1 + rng.IntN(3) {
				ls := &listStore{broken: rng.IntN(8) == 0}
				for _, l := range pool {
					if rng.IntN(2) == 0 {
						ls.logins = append(ls.logins, l)
					}
				}
				rng.Shuffle(len(ls.logins), func(i, j int) { ls.logins[i], ls.logins[j] = ls.logins[j], ls.logins[i] })
				if rng.IntN(2) == 0 {
					srcs = append(srcs, pagedStore{ls})
				} else {
					srcs = append(srcs, ls)
				}
			}
			groups = append(groups, srcs)
		}
		for _, filter := range []map[string]string{{}, {resolver.KeyUsername: "a*"}, {resolver.KeyUsername: "bob"}} {
			want := reference(groups, filter)
			for size := 1; size <= 7; size++ {
				for offset := 0; offset <= len(want)+2; offset++ {
					hits, more, err := resolver.MergedPage(t.Context(), groups, filter, offset, size)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, h := range hits {
						got = append(got, fmt.Sprintf("%d/%s", h.Group, h.Info.String(resolver.KeyUsername)))
					}
					end := min(len(want), offset+size)
					var exp []string
					if offset < len(want) {
						exp = want[offset:end]
					}
					if !slices.Equal(got, exp) || more != (end < len(want)) {
						t.Fatalf("round %d filter %v page (%d, %d): %v more %v, want %v more %v", round, filter, offset, size, got, more, exp, end < len(want))
					}
				}
			}
		}
	}
	// A search key no source knows: nothing, no error.
	groups := [][]resolver.Resolver{{&listStore{logins: []string{"a"}}}}
	if hits, more, err := resolver.MergedPage(t.Context(), groups, map[string]string{"email": "x"}, 0, 5); err != nil || len(hits) != 0 || more {
		t.Errorf("unknown key: %v %v %v", hits, more, err)
	}
	if _, _, err := resolver.MergedPage(t.Context(), groups, nil, -1, 5); err == nil {
		t.Error("a negative offset is accepted")
	}
}

// TestMergedPageTooDeep: a page far into a realm's second resolver is
// refused instead of walking it without bound.
func TestMergedPageTooDeep(t *testing.T) {
	many := &listStore{}
	for i := range resolver.MaxMaskWalk + 10 {
		many.logins = append(many.logins, fmt.Sprint("u", i))
	}
	groups := [][]resolver.Resolver{{pagedStore{&listStore{logins: []string{"x"}}}, pagedStore{many}}}
	if _, _, err := resolver.MergedPage(t.Context(), groups, nil, resolver.MaxMaskWalk+5, 2); !errors.Is(err, resolver.ErrPageTooDeep) {
		t.Errorf("a page past the walk bound: %v", err)
	}
	if hits, more, err := resolver.MergedPage(t.Context(), groups, nil, 0, 2); err != nil || len(hits) != 2 || !more {
		t.Errorf("the first page: %v %v %v", hits, more, err)
	}
}
