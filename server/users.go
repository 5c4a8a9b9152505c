package server

import (
	"maps"
	"slices"
	"strings"

	"github.com/authsrv/authsrv"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/realm"
)

// listParams are the GET /user/ parameters that are not search keys.
var listParams = []string{"realm", "resolver", "user", "username", "attributes", "include_custom_attributes", "page", "pagesize"}

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

// getUsers is GET /user/ (authsrv.Ops.ListUsersPage): admins list users
// (userlist), a user sees only its own account. privacyIDEA has no paging
// here; ours keeps its answer: value is the plain list of one page (page,
// default 1; pagesize, default authsrv.DefaultUserPageSize, at most
// authsrv.MaxUserPageSize), and when the request names a page or more
// users follow, detail tells where the page lies (page, pagesize, and next
// and prev unless at an end), as GET /token/'s value does.
func getUsers(c *call) (answer, error) {
	req, only, err := c.userListParams()
	if err != nil {
		if c.who.Role == roleAdmin {
			return answer{}, c.refused("userlist", err)
		}
		return answer{}, err
	}
	pg, err := c.a.s.Ops().ListUsersPage(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := []any{}
	for _, l := range pg.Users {
		out = append(out, userJSON(l.Listed, l.Custom, only))
	}
	a := answer{value: out}
	if pg.More || c.p.has("page") || c.p.has("pagesize") {
		// No nulls (PAM clients abort on one): next and prev are left out
		// at the ends.
		a.detail = map[string]any{"page": pg.Page, "pagesize": pg.PageSize}
		if pg.More {
			a.detail["next"] = pg.Page + 1
		}
		if pg.Page > 1 {
			a.detail["prev"] = pg.Page - 1
		}
	}
	return a, nil
}

// userListParams reads GET /user/: the search and the attributes to show.
func (c *call) userListParams() (authsrv.UserListRequest, []string, error) {
	var req authsrv.UserListRequest
	var err error
	if req.Realms, err = c.p.list("realm"); err != nil {
		return req, nil, err
	}
	if req.Resolver, err = c.p.str("resolver"); err != nil {
		return req, nil, err
	}
	if req.User, err = c.p.str("user"); err != nil {
		return req, nil, err
	}
	if req.User == "" {
		if req.User, err = c.p.str("username"); err != nil {
			return req, nil, err
		}
	}
	only, err := c.p.list("attributes")
	if err != nil {
		return req, nil, err
	}
	if c.p.has("include_custom_attributes") {
		include, err := c.p.boolean("include_custom_attributes")
		if err != nil {
			return req, nil, err
		}
		req.NoCustom = !include
	}
	if c.p.has("page") {
		if req.Page, err = c.p.integer("page", 1); err != nil {
			return req, nil, err
		}
		if req.Page < 1 {
			return req, nil, authsrv.ErrUserPage
		}
	}
	if c.p.has("pagesize") {
		if req.PageSize, err = c.p.integer("pagesize", authsrv.DefaultUserPageSize); err != nil {
			return req, nil, err
		}
		if req.PageSize < 1 || req.PageSize > authsrv.MaxUserPageSize {
			return req, nil, authsrv.ErrUserPage
		}
	}
	req.Filter = map[string]string{}
	for _, k := range c.p.keys() {
		if slices.Contains(listParams, k) {
			continue
		}
		v, err := c.p.str(k)
		if err != nil {
			return req, nil, err
		}
		req.Filter[k] = v
	}
	return req, only, nil
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

// getUserAttribute is GET /user/attribute (authsrv.Ops.UserAttributes):
// all custom attributes of a user, or one value ("" when it is not set).
func getUserAttribute(c *call) (answer, error) {
	key, err := c.p.str("key")
	if err != nil {
		return answer{}, err
	}
	t := authsrv.Target{}
	if c.who.Role != roleUser {
		if t.User, err = c.p.required("user"); err != nil {
			return answer{}, err
		}
		if t.Realm, err = c.p.str("realm"); err != nil {
			return answer{}, err
		}
		if t.Resolver, err = c.p.str("resolver"); err != nil {
			return answer{}, err
		}
	}
	attrs, err := c.a.s.Ops().UserAttributes(c.ctx, c.caller(), t)
	c.ran()
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

// getEditableAttributes is GET /user/editable_attributes/
// (authsrv.Ops.EditableAttributes): which custom attributes the caller
// may set and delete. With no active policy in the caller's scope every
// key and value is allowed.
func getEditableAttributes(c *call) (answer, error) {
	rights, err := c.a.s.Ops().EditableAttributes(c.ctx, c.caller(), c.target())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: editableJSON(rights)}, nil
}
