package authsrv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
)

// UserRequest is a user to add to or change in an editable user store.
type UserRequest struct {
	// User is the login; Resolver the user store. Realm only narrows the
	// administrator's rights check.
	User, Realm, Resolver string
	// UID identifies the user to update instead of User (UpdateUser).
	UID string
	// Fields are the user's attributes and "password"; keys the user
	// store does not map are ignored, as are the login and uid.
	Fields map[string]string
}

// AttributeRequest is a custom user attribute to set or delete. The user
// is User (login or login@realm) in Realm, optionally in Resolver; for the
// user role it is the caller.
type AttributeRequest struct {
	User, Realm, Resolver string
	Key, Value, Type      string
}

// errNotOwnAttribute refuses a user's deletion of another user's
// attribute.
var errNotOwnAttribute = apierr.New(apierr.Policy, "User is not allowed to delete attributes of other users.")

func unknownResolver(name string) error {
	return apierr.New(apierr.User, fmt.Sprintf("The resolver '%s' does not exist!", name))
}

// editor opens the user store name for writing.
func (o *Ops) editor(ctx context.Context, name string) (*resolver.Instance, resolver.Editor, error) {
	in, err := o.s.resolvers.Instance(ctx, name)
	if errors.Is(err, resolver.ErrNotFound) {
		return nil, nil, unknownResolver(name)
	} else if err != nil {
		return nil, nil, err
	}
	ed, err := in.Editor()
	return in, ed, err
}

// userFields keeps the fields the user store maps (or the standard ones)
// and the password.
func userFields(in *resolver.Instance, fields map[string]string) map[string]string {
	known := in.Fields()
	if known == nil {
		known = []string{resolver.KeyGivenname, resolver.KeySurname, resolver.KeyEmail, resolver.KeyPhone,
			resolver.KeyMobile, resolver.KeyDescription}
	}
	out := map[string]string{}
	for _, k := range append(known, resolver.KeyPassword) {
		if v, ok := fields[k]; ok && k != resolver.KeyUsername && k != resolver.KeyUserID {
			out[k] = v
		}
	}
	return out
}

// AddUser creates req.User in the editable user store req.Resolver (right
// adduser, event user_add) and returns the new uid. The user store is not
// our store: its change cannot share a transaction with the audit entry,
// so the entry is written right after it, with a context the client's
// departure does not cancel (run does so when fn returns).
func (o *Ops) AddUser(ctx context.Context, who caller.Caller, req UserRequest) (string, error) {
	var uid string
	err := o.run(ctx, who, opSpec{event: "user_add", action: "POST /user/", right: rightAddUser,
		target: Target{User: req.User, Realm: req.Realm, Resolver: req.Resolver}},
		func(ctx context.Context, r *opRun) error {
			if req.User == "" {
				return apierr.MissingParameter("user")
			}
			if req.Resolver == "" {
				return apierr.MissingParameter("resolver")
			}
			in, ed, err := o.editor(ctx, req.Resolver)
			if err != nil {
				return err
			}
			if _, err := in.UserID(ctx, req.User); err == nil {
				return apierr.New(apierr.User, fmt.Sprintf("The user %s already exists in resolver %s.", req.User, in.Name()))
			} else if !errors.Is(err, resolver.ErrNoUser) {
				return err
			}
			fields := userFields(in, req.Fields)
			fields[resolver.KeyUsername] = req.User
			uid, err = ed.Create(ctx, fields)
			return err
		})
	return uid, err
}

// UpdateUser changes a user's attributes or password (right updateuser,
// event user_update): for the user role the caller itself, else req.UID
// or req.User in req.Resolver. As in AddUser, the audit entry follows the
// user store's change.
func (o *Ops) UpdateUser(ctx context.Context, who caller.Caller, req UserRequest) error {
	t := Target{User: req.User, Realm: req.Realm, Resolver: req.Resolver}
	return o.run(ctx, who, opSpec{event: "user_update", action: "PUT /user/", right: rightUpdateUser, target: t},
		func(ctx context.Context, r *opRun) error {
			var in *resolver.Instance
			uid := req.UID
			if who.Role == caller.User {
				u, inst, err := o.ResolveTarget(ctx, who, Target{})
				if err != nil {
					return err
				}
				in, uid = inst, u.UID
			} else {
				if req.Resolver == "" {
					return apierr.MissingParameter("resolver")
				}
				var err error
				if in, err = o.s.resolvers.Instance(ctx, req.Resolver); errors.Is(err, resolver.ErrNotFound) {
					return unknownResolver(req.Resolver)
				} else if err != nil {
					return err
				}
				if uid == "" {
					if req.User == "" {
						return apierr.MissingParameter("user")
					}
					if uid, err = in.UserID(ctx, req.User); errors.Is(err, resolver.ErrNoUser) {
						return realm.ErrNoUser
					} else if err != nil {
						return err
					}
				}
			}
			ed, err := in.Editor()
			if err != nil {
				return err
			}
			if err := ed.Update(ctx, uid, userFields(in, req.Fields)); err != nil {
				if errors.Is(err, resolver.ErrNoUser) {
					return realm.ErrNoUser
				}
				return err
			}
			return nil
		})
}

// DeleteUser removes the user login from the editable user store
// resolverName (right deleteuser, event user_delete). As in AddUser, the
// audit entry follows the user store's change.
func (o *Ops) DeleteUser(ctx context.Context, who caller.Caller, resolverName, login string) error {
	return o.run(ctx, who, opSpec{event: "user_delete", action: "DELETE /user/" + resolverName + "/" + login, right: rightDeleteUser,
		target: Target{User: login, Resolver: resolverName}},
		func(ctx context.Context, r *opRun) error {
			in, ed, err := o.editor(ctx, resolverName)
			if err != nil {
				return err
			}
			uid, err := in.UserID(ctx, login)
			if errors.Is(err, resolver.ErrNoUser) {
				return realm.ErrNoUser
			} else if err != nil {
				return err
			}
			return ed.Delete(ctx, uid)
		})
}

// AttributeRights are the custom user attributes a caller may set and
// delete, merged over the policies set_custom_user_attributes and
// delete_custom_user_attributes of the caller's scope.
type AttributeRights struct {
	// All is set when no policy of the scope is active: everything is
	// allowed.
	All bool
	// Set maps a key (or "*") to the values allowed for it (or "*").
	Set map[string][]string
	// Delete lists the keys that may be deleted (or "*").
	Delete []string
	// Policies are the names of the policies the rights come from.
	Policies []string
}

// MaySet reports whether key may be set to value.
func (r AttributeRights) MaySet(key, value string) bool {
	if r.All {
		return true
	}
	for _, k := range []string{key, "*"} {
		vals, ok := r.Set[k]
		if ok && (slices.Contains(vals, "*") || slices.Contains(vals, value)) {
			return true
		}
	}
	return false
}

// MayDelete reports whether key may be deleted.
func (r AttributeRights) MayDelete(key string) bool {
	return r.All || slices.Contains(r.Delete, "*") || slices.Contains(r.Delete, key)
}

// AttributeRights reads who's custom-attribute rights about t from the
// policies of who's scope: ":key: v1 v2 :key2: *" for setting, "key1
// key2" or "*" for deleting. A trusted caller may do everything.
func (o *Ops) AttributeRights(ctx context.Context, who caller.Caller, t Target) (AttributeRights, error) {
	if who.Trusted() {
		return AttributeRights{All: true}, nil
	}
	scope := policy.ScopeAdmin
	if who.Role == caller.User {
		scope = policy.ScopeUser
	}
	active, err := o.s.policies.ActiveInScope(ctx, scope)
	if err != nil || !active {
		return AttributeRights{All: true}, err
	}
	rights := AttributeRights{Set: map[string][]string{}}
	q := o.Query(ctx, who, "set_custom_user_attributes", t)
	vals, err := o.s.policies.Values(ctx, q, false, true)
	if err != nil {
		return rights, err
	}
	for v, names := range vals {
		rights.Policies = append(rights.Policies, names...)
		key := ""
		for _, f := range strings.Fields(v) {
			if len(f) > 1 && strings.HasPrefix(f, ":") && strings.HasSuffix(f, ":") {
				key = f[1 : len(f)-1]
				if _, ok := rights.Set[key]; !ok {
					rights.Set[key] = []string{}
				}
				continue
			}
			if key != "" {
				rights.Set[key] = append(rights.Set[key], f)
			}
		}
	}
	q.Action = "delete_custom_user_attributes"
	dvals, err := o.s.policies.Values(ctx, q, false, true)
	if err != nil {
		return rights, err
	}
	for v, names := range dvals {
		rights.Policies = append(rights.Policies, names...)
		rights.Delete = append(rights.Delete, strings.Fields(v)...)
	}
	slices.Sort(rights.Delete)
	rights.Delete = slices.Compact(rights.Delete)
	return rights, nil
}

// SetUserAttribute sets the custom attribute req.Key of a user to
// req.Value (rights set_custom_user_attributes, event
// set_custom_user_attribute) and returns the attribute's id.
func (o *Ops) SetUserAttribute(ctx context.Context, who caller.Caller, req AttributeRequest) (int, error) {
	t := Target{User: req.User, Realm: req.Realm, Resolver: req.Resolver}
	var id int
	check := func(ctx context.Context, r *opRun) error {
		if req.Key == "" {
			return apierr.MissingParameter("key")
		}
		rights, err := o.AttributeRights(ctx, who, t)
		if err != nil {
			return err
		}
		if !rights.MaySet(req.Key, req.Value) {
			return apierr.New(apierr.Policy, fmt.Sprintf("You are not allowed to set the custom user attribute %s!", req.Key))
		}
		r.note(rights.Policies...)
		return nil
	}
	err := o.run(ctx, who, opSpec{event: "set_custom_user_attribute", action: "POST /user/attribute", target: t, check: check},
		func(ctx context.Context, r *opRun) error {
			if who.Role != caller.User && req.User == "" {
				return apierr.MissingParameter("user")
			}
			u, _, err := o.ResolveTarget(ctx, who, t)
			if err != nil {
				return err
			}
			r.Entry.User, r.Entry.Realm, r.Entry.Resolver = u.Login, u.Realm, u.Resolver
			id, err = o.s.attrs.Set(ctx, u, req.Key, req.Value, req.Type, r.Audit)
			return err
		})
	return id, err
}

// DeleteUserAttribute removes the custom attribute req.Key of the user
// req.User in req.Realm (rights delete_custom_user_attributes, event
// delete_custom_user_attribute; a user only its own) and returns how many
// were removed (0 or 1; 0 for an unknown user).
func (o *Ops) DeleteUserAttribute(ctx context.Context, who caller.Caller, req AttributeRequest) (int, error) {
	t := Target{User: req.User, Realm: req.Realm}
	var n int
	check := func(ctx context.Context, r *opRun) error {
		if who.Role == caller.User && (req.User != who.Name || realm.Normalize(req.Realm) != who.Realm) {
			return errNotOwnAttribute
		}
		rights, err := o.AttributeRights(ctx, who, t)
		if err != nil {
			return err
		}
		if !rights.MayDelete(req.Key) {
			return apierr.New(apierr.Policy, fmt.Sprintf("You are not allowed to delete the custom user attribute %s!", req.Key))
		}
		r.note(rights.Policies...)
		return nil
	}
	err := o.run(ctx, who, opSpec{event: "delete_custom_user_attribute", action: "DELETE /user/attribute/" + req.Key + "/" + req.User + "/" + req.Realm, target: t, check: check},
		func(ctx context.Context, r *opRun) error {
			u, _, err := o.s.realms.Resolve(ctx, req.User, req.Realm)
			if errors.Is(err, realm.ErrNoUser) || errors.Is(err, realm.ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			r.Entry.Resolver = u.Resolver
			n, err = o.s.attrs.Delete(ctx, u, req.Key, r.Audit)
			return err
		})
	return n, err
}
