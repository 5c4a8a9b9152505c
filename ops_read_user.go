package authsrv

import (
	"context"
	"errors"
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
	var out []UserListed
	target := Target{User: req.User, Realm: strings.Join(req.Realms, ","), Resolver: req.Resolver}
	if who.Role == caller.User {
		target = Target{}
	}
	err := o.run(ctx, who, opSpec{event: "user_list", action: "GET /user/", right: adminRight(who, rightUserList), target: target},
		func(ctx context.Context, r *opRun) error {
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
			list, err := o.s.realms.Users(ctx, realms, resolverName, filter)
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
	return out, err
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
