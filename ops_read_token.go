package authsrv

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
)

// Rights of the reads (admin scope), as the HTTP routes checked them
// before the reads moved into the library.
const (
	rightTokenList     = "tokenlist"
	rightGetSerial     = "getserial"
	rightGetChallenges = "getchallenges"
	rightUserList      = "userlist"
)

// adminRight is right for every caller but users, whom an administrators'
// read refuses by role (errAdminOnly) instead.
func adminRight(who caller.Caller, right string) string {
	if who.Role == caller.User {
		return ""
	}
	return right
}

// TokenListRequest is a token list (GET /token/).
type TokenListRequest struct {
	// Filter selects the tokens. The library sets its owner fields for
	// users (their own tokens only) and its Visible realms for
	// realm-restricted administrators.
	Filter token.Filter
	// Owner (administrators): with User, only that user's tokens; else
	// Realm and Resolver narrow by the owner's realm and resolver. It is
	// also the target of the tokenlist right.
	Owner Target
	// SortBy is one of token.SortColumns ("" for serial); Desc reverses.
	SortBy string
	Desc   bool
	// Page is 1-based; PageSize 0 lists every token on one page (at most
	// token.DefaultListCap of them; more is a parameter error).
	Page, PageSize int
}

// ListTokens lists tokens (event token_list): administrators need the
// tokenlist right and see only the realms of their admin policies
// (RealmFilter), with the tokeninfo keys of hide_tokeninfo removed; users
// see only their own tokens. The tokens carry no PIN or sealed value.
func (o *Ops) ListTokens(ctx context.Context, who caller.Caller, req TokenListRequest) (token.Page, error) {
	var page token.Page
	target := req.Owner
	if who.Role == caller.User {
		target = Target{}
	}
	err := o.run(ctx, who, opSpec{event: "token_list", action: "GET /token/", right: adminRight(who, rightTokenList), target: target},
		func(ctx context.Context, r *opRun) error {
			f := req.Filter
			r.Entry.Serial, r.Entry.TokenType = f.Serial, f.Type
			if who.Role == caller.User {
				u, err := o.self(ctx, who)
				if err != nil {
					return err
				}
				f.UserRealm, f.Resolver, f.UserID = u.Realm, u.Resolver, u.UID
			} else {
				if who.Role == caller.Admin {
					vis, err := o.RealmFilter(ctx, who)
					if err != nil {
						return err
					}
					if vis != nil {
						f.Visible = vis
					}
				}
				if req.Owner.User != "" {
					u, _, err := o.ResolveTarget(ctx, who, req.Owner)
					if err != nil {
						return err
					}
					f.UserRealm, f.Resolver, f.UserID = u.Realm, u.Resolver, u.UID
				} else {
					if req.Owner.Realm != "" {
						f.UserRealm = req.Owner.Realm
					}
					if req.Owner.Resolver != "" {
						f.Resolver = req.Owner.Resolver
					}
				}
			}
			if req.SortBy != "" && !slices.Contains(token.SortColumns, req.SortBy) {
				return apierr.New(apierr.Parameter, "sortby must be one of "+strings.Join(token.SortColumns, ", "))
			}
			p, err := o.s.tokens.List(ctx, f, req.SortBy, req.Desc, max(req.Page, 1), req.PageSize)
			if err != nil {
				return err
			}
			hidden, err := o.hiddenInfo(ctx, who)
			if err != nil {
				return err
			}
			for i, t := range p.Tokens {
				p.Tokens[i] = readable(t, hidden)
			}
			page = p
			return nil
		})
	return page, err
}

// hiddenInfo lists the tokeninfo keys that hide_tokeninfo removes for an
// administrator.
func (o *Ops) hiddenInfo(ctx context.Context, who caller.Caller) ([]string, error) {
	if who.Role != caller.Admin {
		return nil, nil
	}
	vals, err := o.s.policies.Values(ctx, o.Query(ctx, who, "hide_tokeninfo", Target{}), false, false)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(vals)), nil
}

// readable is a copy of t as a read hands it out: without its PIN and
// sealed values, and without the hidden tokeninfo keys.
func readable(t *token.Token, hidden []string) *token.Token {
	c := t.Clone()
	c.PIN, c.PINSealed, c.Sealed = "", nil, nil
	for _, k := range hidden {
		delete(c.Info, k)
	}
	return c
}

// GetSerial finds the serial of the token that produced otpValue
// (administrators, right getserial, event token_getserial); "" when none
// matches, and the number of tokens looked at. f.Window is 1 to 1000
// (0: 10).
func (o *Ops) GetSerial(ctx context.Context, who caller.Caller, otpValue string, f token.GetSerialFilter) (string, int, error) {
	var serial string
	var n int
	err := o.run(ctx, who, opSpec{event: "token_getserial", action: "GET /token/getserial/", right: adminRight(who, rightGetSerial)},
		func(ctx context.Context, r *opRun) error {
			if !who.IsAdmin() {
				return errAdminOnly
			}
			r.Entry.Serial, r.Entry.TokenType = f.Serial, f.Type
			if otpValue == "" {
				return apierr.MissingParameter("otp")
			}
			if f.Window == 0 {
				f.Window = 10
			}
			if f.Window < 1 || f.Window > 1000 {
				return apierr.New(apierr.Parameter, "window must be a number from 1 to 1000")
			}
			var err error
			serial, n, err = o.s.tokens.GetSerial(ctx, otpValue, f)
			return err
		})
	return serial, n, err
}

// ChallengeListRequest is a list of open challenges.
type ChallengeListRequest struct {
	// Filter selects by serial and transaction id.
	Filter token.ChallengeFilter
	// Owner, with User set, restricts to that user's tokens.
	Owner Target
	// Page is 1-based, PageSize at least 1 (0: 15); Ascending lists the
	// oldest first.
	Page, PageSize int
	Ascending      bool
}

// ChallengeList is one page of challenges.
type ChallengeList struct {
	// Challenges are the page's challenges, without their sealed data.
	Challenges []token.Challenge
	// Offset is the position of the first of them in the whole list.
	Offset int
	// Count is the number of matching challenges, Page the page.
	Count, Page int
}

// Challenges lists open challenges (administrators, right getchallenges,
// event token_getchallenges).
func (o *Ops) Challenges(ctx context.Context, who caller.Caller, req ChallengeListRequest) (ChallengeList, error) {
	var res ChallengeList
	err := o.run(ctx, who, opSpec{event: "token_getchallenges", action: "GET /token/challenges/", right: adminRight(who, rightGetChallenges), target: req.Owner},
		func(ctx context.Context, r *opRun) error {
			if !who.IsAdmin() {
				return errAdminOnly
			}
			f := req.Filter
			r.Entry.Serial = f.Serial
			if req.Owner.User != "" {
				u, _, err := o.ResolveTarget(ctx, who, req.Owner)
				if err != nil {
					return err
				}
				toks, err := o.s.tokens.ByOwner(ctx, u)
				if err != nil {
					return err
				}
				f.Serials = []string{}
				for _, t := range toks {
					f.Serials = append(f.Serials, t.Serial)
				}
			}
			page, size := max(req.Page, 1), req.PageSize
			if size == 0 {
				size = 15
			}
			if size < 1 {
				return apierr.New(apierr.Parameter, "page must be at least 1 and pagesize from 1 to 10000")
			}
			list, err := o.s.tokens.Challenges(ctx, f)
			if err != nil {
				return err
			}
			if req.Ascending {
				slices.Reverse(list)
			}
			start := (page - 1) * size
			res = ChallengeList{Offset: start, Count: len(list), Page: page, Challenges: []token.Challenge{}}
			for i := start; i < len(list) && i < start+size; i++ {
				ch := list[i]
				ch.Data, ch.Session = nil, ""
				res.Challenges = append(res.Challenges, ch)
			}
			return nil
		})
	return res, err
}
