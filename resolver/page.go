package resolver

import (
	"context"
	"errors"
	"maps"
	"strings"
)

// Page is one page of a user search.
type Page struct {
	// Users are the page's users, in the store's order.
	Users []Info
	// More reports whether users follow the page.
	More bool
	// Total is how many users the whole search matches when the store
	// knows it cheaply, else -1. A page that reaches the end of the
	// result (More false) always knows it.
	Total int
}

// Pager is implemented by stores that answer one page of a search
// without reading the whole result: the users Search(filter) would list,
// in a stable order, skipping the first offset and at most limit of them
// (limit ≥ 1, offset ≥ 0). Unlike Search, a page is not cut by the
// store's own list size limit (SIZELIMIT, Limit): the page size bounds
// the work instead.
type Pager interface {
	SearchPage(ctx context.Context, filter map[string]string, offset, limit int) (Page, error)
}

// Loader is implemented by stores that load their data in the background
// after New (passwd): Loading reports whether the first load is still
// running. Lookups made meanwhile wait for it.
type Loader interface {
	Loading() bool
}

// SearchPage returns one page of r's search: through Pager when r has
// it, else by cutting Search's answer (which the store bounds itself).
func SearchPage(ctx context.Context, r Resolver, filter map[string]string, offset, limit int) (Page, error) {
	if offset < 0 || limit < 1 {
		return Page{}, errors.New("resolver: page offset below 0 or limit below 1")
	}
	if p, ok := r.(Pager); ok {
		return p.SearchPage(ctx, filter, offset, limit)
	}
	all, err := r.Search(ctx, filter)
	if err != nil {
		return Page{}, err
	}
	return CutPage(all, offset, limit), nil
}

// CutPage is the page [offset, offset+limit) of a whole result.
func CutPage(all []Info, offset, limit int) Page {
	p := Page{Total: len(all)}
	if offset >= len(all) {
		return p
	}
	end := min(len(all), offset+limit)
	p.Users = all[offset:end]
	p.More = end < len(all)
	return p
}

// Hit is a user found by MergedPage with the source it came from.
type Hit struct {
	Info Info
	// Group and Source index the groups and sources given to MergedPage.
	Group, Source int
}

// MaxMaskWalk bounds how many users of a realm's second and later
// resolvers one merged page may walk (each is checked against the
// resolvers before it); a deeper page is refused with ErrPageTooDeep.
const MaxMaskWalk = 100_000

// ErrPageTooDeep: the page lies too far into a realm with several
// resolvers to be found with bounded work.
var ErrPageTooDeep = errors.New("resolver: the page lies too deep in a realm with several resolvers; narrow the search")

// MergedPage pages through groups of sources as one list: the groups in
// order, within a group its sources in order (realm and priority order),
// and within a group a user listed once by username, the first source
// that lists it winning (admin-config section 4). A source that fails or
// cannot search by a key of filter is skipped, as in an unpaged listing;
// a cancelled ctx stops the walk. The first source of a group is asked
// for the page directly; a later one is walked from its start, each user
// checked against the sources before it with an exact username search.
// It returns the page and whether users follow it.
func MergedPage(ctx context.Context, groups [][]Resolver, filter map[string]string, offset, limit int) ([]Hit, bool, error) {
	if offset < 0 || limit < 1 {
		return nil, false, errors.New("resolver: page offset below 0 or limit below 1")
	}
	var out []Hit
	walked := 0
	skip := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil // the source is left out, as in an unpaged listing
	}
	for g, srcs := range groups {
		for si, src := range srcs {
			// need counts the users still wanted, one more than the page
			// to learn whether more follow.
			need := limit + 1 - len(out)
			if si == 0 {
				p, err := SearchPage(ctx, src, filter, offset, need)
				if err != nil {
					if err := skip(err); err != nil {
						return nil, false, err
					}
					continue
				}
				if len(p.Users) == 0 && offset > 0 && p.Total < 0 {
					n, err := countAll(ctx, src, filter)
					if err != nil {
						if err := skip(err); err != nil {
							return nil, false, err
						}
						continue
					}
					p.Total = n
				}
				for _, u := range p.Users {
					out = append(out, Hit{Info: u, Group: g, Source: si})
				}
				if len(p.Users) > 0 || p.More {
					offset = 0
				} else {
					offset = max(0, offset-p.Total)
				}
				if len(out) > limit {
					return out[:limit], true, nil
				}
				continue
			}
			// A later source: walk it from the start, leaving out users an
			// earlier source of the group lists.
			const batch = 256
			for at := 0; ; at += batch {
				p, err := SearchPage(ctx, src, filter, at, batch)
				if err != nil {
					if err := skip(err); err != nil {
						return nil, false, err
					}
					break
				}
				for _, u := range p.Users {
					walked++
					if walked > MaxMaskWalk {
						return nil, false, ErrPageTooDeep
					}
					masked, err := listedBefore(ctx, srcs[:si], filter, u.String(KeyUsername))
					if err != nil {
						return nil, false, err
					}
					if masked {
						continue
					}
					if offset > 0 {
						offset--
						continue
					}
					out = append(out, Hit{Info: u, Group: g, Source: si})
					if len(out) > limit {
						return out[:limit], true, nil
					}
				}
				if !p.More {
					break
				}
			}
		}
	}
	return out, false, nil
}

// countAll counts a source's matches by walking its pages.
func countAll(ctx context.Context, r Resolver, filter map[string]string) (int, error) {
	const batch = 1000
	n := 0
	for {
		p, err := SearchPage(ctx, r, filter, n, batch)
		if err != nil {
			return 0, err
		}
		if p.Total >= 0 {
			return p.Total, nil
		}
		n += len(p.Users)
		if !p.More || len(p.Users) == 0 {
			return n, nil
		}
	}
}

// listedBefore reports whether one of srcs lists login under filter.
// Sources that fail are skipped (they list nobody).
func listedBefore(ctx context.Context, srcs []Resolver, filter map[string]string, login string) (bool, error) {
	f := maps.Clone(filter)
	if f == nil {
		f = map[string]string{}
	}
	f[KeyUsername] = login
	limit := 2
	if strings.Contains(login, "*") {
		limit = 100 // the login reads as a pattern: look among its matches
	}
	for _, s := range srcs {
		p, err := SearchPage(ctx, s, f, 0, limit)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			continue
		}
		for _, u := range p.Users {
			if u.String(KeyUsername) == login {
				return true, nil
			}
		}
	}
	return false, nil
}
