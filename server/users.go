package server

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/authsrv/authsrv"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/user"
)

// listParams are the GET /user/ parameters that are not search keys.
var listParams = []string{"realm", "resolver", "user", "username", "attributes", "include_custom_attributes"}

// isRealm is the realm test user.Split needs.
func (c *call) isRealm(name string) bool { return c.a.s.Realms().Exists(c.ctx, name) }

// targetUser finds the user a request is about: the caller itself for the
// user role; else the "user" parameter (login or login@realm) with the
// optional "realm" and "resolver".
func (c *call) targetUser() (user.User, *resolver.Instance, error) {
	t := authsrv.Target{}
	if c.who == nil || c.who.Role != roleUser {
		var err error
		if t.User, err = c.p.required("user"); err != nil {
			return user.User{}, nil, err
		}
		if t.Realm, err = c.p.str("realm"); err != nil {
			return user.User{}, nil, err
		}
		if t.Resolver, err = c.p.str("resolver"); err != nil {
			return user.User{}, nil, err
		}
	}
	return c.a.s.Ops().ResolveTarget(c.ctx, c.caller(), t)
}

// userJSON renders a listed user.
func userJSON(l realm.Listed, custom map[string]string, only []string) map[string]any {
	obj := map[string]any{}
	for k, v := range l.Info {
		obj[k] = v
	}
	obj["realm"], obj["resolver"], obj["editable"] = l.Realm, l.Resolver, l.Editable
	for k, v := range custom {
		if _, taken := obj[k]; !taken {
			obj[k] = v
		}
	}
	if len(only) > 0 {
		maps.DeleteFunc(obj, func(k string, _ any) bool { return !slices.Contains(only, k) })
	}
	return obj
}

// getUsers is GET /user/: admins list users (userlist), a user sees only
// its own account.
func getUsers(c *call) (answer, error) {
	if c.who.Role == roleAdmin {
		if err := c.authorize("userlist"); err != nil {
			return answer{}, err
		}
	}
	realms, err := c.p.list("realm")
	if err != nil {
		return answer{}, err
	}
	resolverName, err := c.p.str("resolver")
	if err != nil {
		return answer{}, err
	}
	login, err := c.p.str("user")
	if err != nil {
		return answer{}, err
	}
	if login == "" {
		if login, err = c.p.str("username"); err != nil {
			return answer{}, err
		}
	}
	only, err := c.p.list("attributes")
	if err != nil {
		return answer{}, err
	}
	includeCustom := true
	if c.p.has("include_custom_attributes") {
		if includeCustom, err = c.p.boolean("include_custom_attributes"); err != nil {
			return answer{}, err
		}
	}
	filter := map[string]string{}
	for _, k := range c.p.keys() {
		if slices.Contains(listParams, k) {
			continue
		}
		v, err := c.p.str(k)
		if err != nil {
			return answer{}, err
		}
		filter[k] = v
	}
	if c.who.Role == roleUser {
		realms, resolverName, login = []string{c.who.Realm}, "", c.who.Username
		filter = map[string]string{}
		// The exact login, not a pattern: a user name containing * must
		// not list other users.
		login = strings.ReplaceAll(login, "*", "")
	}
	if login != "" && login != "*" {
		filter[resolver.KeyUsername] = login
	}
	list, err := c.a.s.Realms().Users(c.ctx, realms, resolverName, filter)
	if err != nil {
		return answer{}, err
	}
	anyAttrs := false
	if includeCustom {
		if anyAttrs, err = c.a.s.UserAttributes().Exist(c.ctx); err != nil {
			return answer{}, err
		}
	}
	out := []any{}
	for _, l := range list {
		if c.who.Role == roleUser && l.Info.String(resolver.KeyUsername) != c.who.Username {
			continue
		}
		var custom map[string]string
		if anyAttrs {
			u := user.User{Login: l.Info.String(resolver.KeyUsername), Realm: l.Realm, Resolver: l.Resolver, UID: l.Info.String(resolver.KeyUserID)}
			if custom, err = c.a.s.UserAttributes().Get(c.ctx, u); err != nil {
				return answer{}, err
			}
		}
		out = append(out, userJSON(l, custom, only))
	}
	return answer{value: out}, nil
}

// userFields are the request's string parameters; the library keeps
// those the user store maps and the password.
func (c *call) userFields() map[string]string {
	fields := map[string]string{}
	for _, k := range c.p.keys() {
		if v, err := c.p.str(k); err == nil {
			fields[k] = v
		}
	}
	return fields
}

// postUser is POST /user/ (adduser): creates a user in an editable
// resolver and returns its uid.
func postUser(c *call) (answer, error) {
	req := authsrv.UserRequest{Fields: c.userFields()}
	var err error
	if req.User, err = c.p.required("user"); err != nil {
		return answer{}, c.refused("adduser", err)
	}
	if req.Resolver, err = c.p.required("resolver"); err != nil {
		return answer{}, c.refused("adduser", err)
	}
	req.Realm, _ = c.p.str("realm")
	uid, err := c.a.s.Ops().AddUser(c.ctx, c.caller(), req)
	c.ran()
	return answer{value: uid}, err
}

// putUser is PUT /user/ (updateuser); a user may change its own data.
func putUser(c *call) (answer, error) {
	req := authsrv.UserRequest{Fields: c.userFields()}
	if c.who.Role != roleUser {
		var err error
		for key, dst := range map[string]*string{"user": &req.User, "realm": &req.Realm, "resolver": &req.Resolver, "userid": &req.UID} {
			if *dst, err = c.p.str(key); err != nil {
				return answer{}, c.refused("updateuser", err)
			}
		}
	}
	err := c.a.s.Ops().UpdateUser(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// deleteUserOrAttribute serves DELETE /user/{resolver}/{user} and DELETE
// /user/attribute/{key}/{user}/{realm}, which httprouter cannot register
// side by side.
func deleteUserOrAttribute(c *call) (answer, error) {
	first, _ := c.p.str("first")
	rest, _ := c.p.str("rest")
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if first == "attribute" && len(parts) == 3 {
		return deleteUserAttribute(c, parts[0], parts[1], parts[2])
	}
	if len(parts) != 1 || parts[0] == "" {
		return answer{}, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server.")
	}
	if c.who.Role != roleAdmin {
		return answer{}, errWrongRole
	}
	err := c.a.s.Ops().DeleteUser(c.ctx, c.caller(), first, parts[0])
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// postUserAttribute is POST /user/attribute.
func postUserAttribute(c *call) (answer, error) {
	var req authsrv.AttributeRequest
	var err error
	if req.Key, err = c.p.required("key"); err != nil {
		return answer{}, err
	}
	for key, dst := range map[string]*string{"value": &req.Value, "type": &req.Type} {
		if *dst, err = c.p.str(key); err != nil {
			return answer{}, err
		}
	}
	if c.who.Role != roleUser {
		t := c.target()
		req.User, req.Realm, req.Resolver = t.User, t.Realm, t.Resolver
	}
	id, err := c.a.s.Ops().SetUserAttribute(c.ctx, c.caller(), req)
	c.ran()
	return answer{value: id}, err
}

// getUserAttribute is GET /user/attribute: all custom attributes of a
// user, or one value ("" when it is not set).
func getUserAttribute(c *call) (answer, error) {
	key, err := c.p.str("key")
	if err != nil {
		return answer{}, err
	}
	u, _, err := c.targetUser()
	if err != nil && !errors.Is(err, realm.ErrNoUser) {
		return answer{}, err
	}
	attrs, err := c.a.s.UserAttributes().Get(c.ctx, u)
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		return answer{value: attrs[key]}, nil
	}
	return answer{value: attrs}, nil
}

// deleteUserAttribute is DELETE /user/attribute/{key}/{user}/{realm}.
func deleteUserAttribute(c *call, key, login, realmName string) (answer, error) {
	n, err := c.a.s.Ops().DeleteUserAttribute(c.ctx, c.caller(), authsrv.AttributeRequest{Key: key, User: login, Realm: realmName})
	c.ran()
	return answer{value: n}, err
}

// getEditableAttributes is GET /user/editable_attributes/: which custom
// attributes the caller may set and delete. With no active policy in the
// caller's scope every key and value is allowed.
func getEditableAttributes(c *call) (answer, error) {
	rights, err := c.a.s.Ops().AttributeRights(c.ctx, c.caller(), c.target())
	if err != nil {
		return answer{}, err
	}
	c.policies = append(c.policies, rights.Policies...)
	return answer{value: editableJSON(rights)}, nil
}
