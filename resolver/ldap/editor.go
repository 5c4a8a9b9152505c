package ldap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	goldap "github.com/go-ldap/ldap/v3"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/resolver"
)

// personClasses need cn and sn.
var personClasses = []string{"person", "organizationalperson", "inetorgperson"}

// Editable reports whether EDITABLE is set.
func (s *Store) Editable() bool { return s.cfg.editable }

type attrVals struct {
	name string
	vals []string
}

// ldapAttrs maps user fields to attributes (keyed by lower-case name).
// The password becomes an {SSHA} hash in USERINFO's password attribute.
// Empty values stay as empty lists (an update deletes the attribute).
func (s *Store) ldapAttrs(fields map[string]string) (map[string]*attrVals, error) {
	out := map[string]*attrVals{}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		var attr string
		switch k {
		case resolver.KeyPassword:
			if s.cfg.passwordAttr == "" {
				return nil, apierr.New(apierr.Parameter, "The resolver maps no password attribute (USERINFO password).")
			}
			attr = s.cfg.passwordAttr
			if v != "" {
				h, err := sshaHash(v)
				if err != nil {
					return nil, err
				}
				v = h
			}
		default:
			a, ok := s.cfg.userInfo[k]
			if !ok {
				return nil, apierr.New(apierr.Parameter, fmt.Sprintf("The resolver has no attribute %q.", k))
			}
			attr = a
		}
		av := &attrVals{name: attr}
		if v != "" {
			av.vals = []string{v}
		}
		out[strings.ToLower(attr)] = av
	}
	return out, nil
}

// writeFail turns a failed write into an error: the directory's refusal
// (schema, access, existing entry) is shown by its result name; anything
// else is ErrUnavailable.
func (s *Store) writeFail(ctx context.Context, op string, err error) error {
	if code := resultCode(err); code > 0 && code < goldap.ErrorNetwork {
		return apierr.New(apierr.Resolver, "The LDAP server refused the change: "+goldap.LDAPResultCodeMap[uint16(code)]+".").Wrap(err)
	}
	return s.fail(ctx, op, err)
}

// Create adds a user at DN_TEMPLATE (tag values escaped as DN values)
// with the mapped fields and OBJECT_CLASSES; the password is stored as
// {SSHA}. It returns the uid the directory gives the new entry.
func (s *Store) Create(ctx context.Context, fields map[string]string) (string, error) {
	if !s.cfg.editable {
		return "", resolver.ErrNotEditable
	}
	if err := ctx.Err(); err != nil {
		return "", s.fail(ctx, "create", err)
	}
	login := fields[resolver.KeyUsername]
	if login == "" {
		return "", apierr.MissingParameter(resolver.KeyUsername)
	}
	if s.cfg.dnTemplate == "" {
		return "", configError("DN_TEMPLATE is needed to create users.")
	}
	attrs, err := s.ldapAttrs(fields)
	if err != nil {
		return "", err
	}
	dn := strings.NewReplacer(
		"<basedn>", s.cfg.base,
		"<username>", goldap.EscapeDN(login),
		"<givenname>", goldap.EscapeDN(fields[resolver.KeyGivenname]),
		"<surname>", goldap.EscapeDN(fields[resolver.KeySurname]),
	).Replace(s.cfg.dnTemplate)
	parsed, err := goldap.ParseDN(dn)
	if err != nil || len(parsed.RDNs) == 0 {
		return "", apierr.New(apierr.Parameter, "The user's names do not give a valid DN with DN_TEMPLATE.")
	}
	if !s.inScope(parsed) {
		return "", configError("DN_TEMPLATE places users outside LDAPBASE and SCOPE.")
	}
	// The directory wants the RDN's values in the entry.
	for _, ava := range parsed.RDNs[0].Attributes {
		k := strings.ToLower(ava.Type)
		av, ok := attrs[k]
		if !ok {
			av = &attrVals{name: ava.Type}
			attrs[k] = av
		}
		if !slices.ContainsFunc(av.vals, func(v string) bool { return strings.EqualFold(v, ava.Value) }) {
			av.vals = append(av.vals, ava.Value)
		}
	}
	// Person classes need cn and sn; fill them from the names when
	// USERINFO maps neither.
	if slices.ContainsFunc(s.cfg.objectClasses, func(oc string) bool { return slices.Contains(personClasses, strings.ToLower(oc)) }) {
		full := strings.TrimSpace(fields[resolver.KeyGivenname] + " " + fields[resolver.KeySurname])
		for name, value := range map[string]string{"cn": cmp.Or(full, login), "sn": cmp.Or(fields[resolver.KeySurname], login)} {
			if av, ok := attrs[name]; !ok || len(av.vals) == 0 {
				attrs[name] = &attrVals{name: name, vals: []string{value}}
			}
		}
	}
	req := goldap.NewAddRequest(dn, nil)
	req.Attribute("objectClass", s.cfg.objectClasses)
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if av := attrs[k]; len(av.vals) > 0 {
			req.Attribute(av.name, av.vals)
		}
	}
	deadline := s.deadline(ctx)
	if err := s.pool.do(ctx, deadline, func(l *goldap.Conn) error { return l.Add(req) }); err != nil {
		return "", s.writeFail(ctx, "create", err)
	}
	// Read the uid back as the directory writes it.
	entries, err := s.search(ctx, deadline, dn, goldap.ScopeBaseObject, "(objectClass=*)", s.uidAttrs, 1)
	if err != nil {
		return "", s.fail(ctx, "create", err)
	}
	if len(entries) == 0 || s.uidOf(entries[0]) == "" {
		return "", s.fail(ctx, "create", errors.New("the new entry has no uid"))
	}
	return s.uidOf(entries[0]), nil
}

// Update replaces the given fields of uid; an empty value deletes the
// attribute, a password is stored as {SSHA}.
func (s *Store) Update(ctx context.Context, uid string, fields map[string]string) error {
	if !s.cfg.editable {
		return resolver.ErrNotEditable
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "update", err)
	}
	attrs, err := s.ldapAttrs(fields)
	if err != nil {
		return err
	}
	deadline := s.deadline(ctx)
	e, err := s.find(ctx, deadline, uid, false)
	if err != nil {
		return err
	}
	if len(attrs) == 0 {
		return nil
	}
	req := goldap.NewModifyRequest(e.DN, nil)
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		req.Replace(attrs[k].name, attrs[k].vals)
	}
	if err := s.pool.do(ctx, deadline, func(l *goldap.Conn) error { return l.Modify(req) }); err != nil {
		if resultCode(err) == goldap.LDAPResultNoSuchObject {
			return resolver.ErrNoUser
		}
		return s.writeFail(ctx, "update", err)
	}
	return nil
}

// Delete removes uid's entry.
func (s *Store) Delete(ctx context.Context, uid string) error {
	if !s.cfg.editable {
		return resolver.ErrNotEditable
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "delete", err)
	}
	deadline := s.deadline(ctx)
	e, err := s.find(ctx, deadline, uid, false)
	if err != nil {
		return err
	}
	req := goldap.NewDelRequest(e.DN, nil)
	if err := s.pool.do(ctx, deadline, func(l *goldap.Conn) error { return l.Del(req) }); err != nil {
		if resultCode(err) == goldap.LDAPResultNoSuchObject {
			return resolver.ErrNoUser
		}
		return s.writeFail(ctx, "delete", err)
	}
	return nil
}
