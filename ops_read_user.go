package authsrv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/user"
)

// UserListRequest is a user search (GET /user/).
type UserListRequest struct {
	// Realms to scan (none: see realm.Service.Users); Resolver narrows.
	Realms   []string
	Resolver string
	// User is a login or a pattern with * ("" or "*": everyone).
	User string
	// Filter maps resolver search fields to patterns.
	Filter map[string]string
	// NoCustom leaves out the custom attributes.
	NoCustom bool
	// Page (from 1; 0 is 1) and PageSize (0 is DefaultUserPageSize, at
	// most MaxUserPageSize) choose the page of the list: the realms in
	// order, in each its resolvers in priority order, a user once per
	// realm (the first resolver wins).
	Page, PageSize int
}

// DefaultUserPageSize is the page size of a user list that names none, so
// that no request lists a whole directory at once.
const DefaultUserPageSize = 1000

// MaxUserPageSize is the largest page size a user list accepts.
const MaxUserPageSize = 10000

// ErrUserPage: the page or page size of a user list is out of range.
var ErrUserPage = apierr.New(apierr.Parameter, "page must be at least 1 and pagesize from 1 to 10000")

// UserPage is one page of a user list.
type UserPage struct {
	Users []UserListed
	// Page and PageSize are the page answered; More reports whether users
	// follow it.
	Page, PageSize int
	More           bool
}

// UserListed is a listed user with its custom attributes.
type UserListed struct {
	realm.Listed
	// Custom are the user's custom attributes (nil when none exist).
	Custom map[string]string
}

// ListUsers searches users (event user_list): administrators need the
// userlist right, and without realms they scan only the realms of the
// userlist policies that allowed them (all when one has no realm); a
// user finds only itself.
func (o *Ops) ListUsers(ctx context.Context, who caller.Caller, req UserListRequest) ([]UserListed, error) {
	p, err := o.ListUsersPage(ctx, who, req)
	return p.Users, err
}

// ListUsersPage is ListUsers with the page's position: one page of the
// list (req.Page, req.PageSize), and whether more users follow.
func (o *Ops) ListUsersPage(ctx context.Context, who caller.Caller, req UserListRequest) (UserPage, error) {
	var out []UserListed
	page, size := req.Page, req.PageSize
	if page == 0 {
		page = 1
	}
	if size == 0 {
		size = DefaultUserPageSize
	}
	more := false
	target := Target{User: req.User, Realm: strings.Join(req.Realms, ","), Resolver: req.Resolver}
	if who.Role == caller.User {
		target = Target{}
	}
	err := o.run(ctx, who, opSpec{event: "user_list", action: "GET /user/", right: adminRight(who, rightUserList), target: target},
		func(ctx context.Context, r *opRun) error {
			if page < 1 || size < 1 || size > MaxUserPageSize || page > (1<<31-1)/size {
				return ErrUserPage
			}
			realms, resolverName, login, filter := req.Realms, req.Resolver, req.User, map[string]string{}
			for k, v := range req.Filter {
				filter[k] = v
			}
			if who.Role == caller.User {
				// The exact login, not a pattern: a user name containing
				// * must not list other users.
				realms, resolverName, login, filter = []string{who.Realm}, "", strings.ReplaceAll(who.Name, "*", ""), map[string]string{}
			} else if len(realms) == 0 && who.Role == caller.Admin {
				rs, err := o.policyRealms(ctx, r.policies)
				if err != nil {
					return err
				}
				realms = rs
			}
			if login != "" && login != "*" {
				filter[resolver.KeyUsername] = login
			}
			var list []realm.Listed
			var err error
			list, more, err = o.userPage(ctx, realms, resolverName, filter, (page-1)*size, size)
			if err != nil {
				return err
			}
			anyAttrs := false
			if !req.NoCustom {
				if anyAttrs, err = o.s.attrs.Exist(ctx); err != nil {
					return err
				}
			}
			out = []UserListed{}
			for _, l := range list {
				if who.Role == caller.User && l.Info.String(resolver.KeyUsername) != who.Name {
					continue
				}
				ul := UserListed{Listed: l}
				if anyAttrs {
					u := user.User{Login: l.Info.String(resolver.KeyUsername), Realm: l.Realm, Resolver: l.Resolver, UID: l.Info.String(resolver.KeyUserID)}
					if ul.Custom, err = o.s.attrs.Get(ctx, u); err != nil {
						return err
					}
				}
				out = append(out, ul)
			}
			return nil
		})
	return UserPage{Users: out, Page: page, PageSize: size, More: more}, err
}

// userPage lists one page of users: the realms scanned are the given ones;
// else those containing resolverName; else all (realm.Service.Users'
// rules). Per realm the resolvers are asked in priority order (only
// resolverName when it is given without realms), a user is listed once per
// realm (the first resolver wins), and a resolver that fails or cannot
// search by a key of filter is skipped (resolver.MergedPage).
func (o *Ops) userPage(ctx context.Context, realms []string, resolverName string, filter map[string]string, offset, limit int) ([]realm.Listed, bool, error) {
	list, _, err := o.s.realms.List(ctx)
	if err != nil {
		return nil, false, err
	}
	var scan []realm.Realm
	switch {
	case len(realms) > 0:
		for _, name := range realms {
			for _, r := range list {
				if r.Name == realm.Normalize(name) && !slices.ContainsFunc(scan, func(x realm.Realm) bool { return x.Name == r.Name }) {
					scan = append(scan, r)
				}
			}
		}
		resolverName = "" // with a realm the resolver is ignored, as privacyIDEA does
	case resolverName != "":
		for _, r := range list {
			if slices.ContainsFunc(r.Resolvers, func(e realm.Entry) bool { return strings.EqualFold(e.Name, resolverName) }) {
				scan = append(scan, r)
			}
		}
	default:
		scan = list
	}
	var groups [][]resolver.Resolver
	var sources [][]*resolver.Instance
	var names []string
	for _, r := range scan {
		var g []resolver.Resolver
		var ins []*resolver.Instance
		for _, e := range o.s.realms.Ordered(r) {
			if resolverName != "" && !strings.EqualFold(e.Name, resolverName) {
				continue
			}
			in, err := o.s.resolvers.Instance(ctx, e.Name)
			if err != nil {
				continue
			}
			g, ins = append(g, in.Store()), append(ins, in)
		}
		groups, sources, names = append(groups, g), append(sources, ins), append(names, r.Name)
	}
	hits, more, err := resolver.MergedPage(ctx, groups, filter, offset, limit)
	if err != nil {
		if errors.Is(err, resolver.ErrPageTooDeep) {
			return nil, false, apierr.New(apierr.Parameter, "The page lies too deep in a realm with several resolvers; narrow the search.")
		}
		return nil, false, fmt.Errorf("listing users: %w", err)
	}
	out := make([]realm.Listed, 0, len(hits))
	for _, h := range hits {
		in := sources[h.Group][h.Source]
		out = append(out, realm.Listed{Info: h.Info, Realm: names[h.Group], Resolver: in.Name(), Editable: in.Editable()})
	}
	return out, more, nil
}

// policyRealms is the union of the realms of the named policies; nil
// (no restriction) when there are none or one has no realm.
func (o *Ops) policyRealms(ctx context.Context, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		p, ok, err := o.s.policies.Get(ctx, n)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if len(p.Realm) == 0 {
			return nil, nil
		}
		out = append(out, p.Realm...)
	}
	return out, nil
}

// UserAttributes reads the custom attributes of the user t (users: their
// own; event get_user_attribute). An unknown user has none.
func (o *Ops) UserAttributes(ctx context.Context, who caller.Caller, t Target) (map[string]string, error) {
	var out map[string]string
	if who.Role == caller.User {
		t = Target{}
	}
	err := o.run(ctx, who, opSpec{event: "get_user_attribute", action: "GET /user/attribute", target: t},
		func(ctx context.Context, r *opRun) error {
			if who.Role != caller.User && t.User == "" {
				return apierr.MissingParameter("user")
			}
			u, _, err := o.ResolveTarget(ctx, who, t)
			if err != nil && !errors.Is(err, realm.ErrNoUser) {
				return err
			}
			out, err = o.s.attrs.Get(ctx, u)
			return err
		})
	return out, err
}

// EditableAttributes reads which custom attributes who may set and
// delete on t (event get_editable_attributes; see AttributeRights).
func (o *Ops) EditableAttributes(ctx context.Context, who caller.Caller, t Target) (AttributeRights, error) {
	var out AttributeRights
	err := o.run(ctx, who, opSpec{event: "get_editable_attributes", action: "GET /user/editable_attributes/", target: t},
		func(ctx context.Context, r *opRun) error {
			var err error
			out, err = o.AttributeRights(ctx, who, t)
			r.note(out.Policies...)
			return err
		})
	return out, err
}
