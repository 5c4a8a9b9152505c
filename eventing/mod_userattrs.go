package eventing

import (
	"context"
	"fmt"
	"strings"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/user"
)

// Actions and user choices of the CustomUserAttributes module.
const (
	uaActSet         = "set_custom_user_attributes"
	uaActDelete      = "delete_custom_user_attributes"
	uaUserTokenOwner = "tokenowner"
	uaUserLoggedIn   = "logged_in_user"
	uaInternalPrefix = "internal_"
	uaOptUser        = "user"
	uaOptKey         = "attrkey"
	uaOptValue       = "attrvalue"
	uaModuleName     = "CustomUserAttributes"
)

// userAttrsModule is the CustomUserAttributes handler module: it sets or
// deletes a custom attribute of the token owner or of the logged-in user.
type userAttrsModule struct{ s *Service }

var _ Module = (*userAttrsModule)(nil)

func newCustomUserAttributes(s *Service) Module { return &userAttrsModule{s: s} }

func (m *userAttrsModule) Name() string        { return uaModuleName }
func (m *userAttrsModule) Positions() []string { return []string{Post, Pre} }
func (m *userAttrsModule) DefaultAbort() bool  { return false }

func (m *userAttrsModule) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	who := func(desc string) OptionSpec {
		return OptionSpec{Type: "str", Required: true, Description: desc, Value: []string{uaUserTokenOwner, uaUserLoggedIn}}
	}
	return map[string]map[string]OptionSpec{
		uaActSet: {
			uaOptUser:  who("Whose attribute is set: the token owner (default) or the logged-in user."),
			uaOptKey:   {Type: "str", Required: true, Description: "The key of the custom attribute."},
			uaOptValue: {Type: "str", Description: "The value of the custom attribute."},
		},
		uaActDelete: {
			uaOptUser: who("Whose attribute is deleted: the token owner (default) or the logged-in user."),
			uaOptKey:  {Type: "str", Required: true, Description: "The key of the custom attribute."},
		},
	}, nil
}

// Check validates the user choice and the key of the known actions; an
// unknown action is stored (privacyIDEA does not validate action names)
// and fails when it runs.
func (m *userAttrsModule) Check(_ context.Context, d Definition) error {
	act := strings.ToLower(strings.TrimSpace(d.Action))
	if act != uaActSet && act != uaActDelete {
		return nil
	}
	switch strings.TrimSpace(d.Options[uaOptUser]) {
	case "", uaUserTokenOwner, uaUserLoggedIn:
	default:
		return paramErr(fmt.Sprintf("The option user must be %s or %s.", uaUserTokenOwner, uaUserLoggedIn))
	}
	if err := uaCheckKey(d.Options[uaOptKey], act); err != nil {
		return err
	}
	if act == uaActSet && len(d.Options[uaOptValue]) > user.MaxValueLen {
		return paramErr(fmt.Sprintf("The attribute value must be at most %d bytes.", user.MaxValueLen))
	}
	return nil
}

// uaCheckKey refuses a missing or malformed key and the keys of internal
// attributes, which handlers may not touch.
func uaCheckKey(key, act string) error {
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return paramErr(fmt.Sprintf("The action %q needs the option %q.", act, uaOptKey))
	case strings.HasPrefix(strings.ToLower(key), uaInternalPrefix):
		return paramErr("The attribute " + key + " is internal and cannot be changed by an event handler.")
	case len(key) > user.MaxKeyLen || strings.ContainsAny(key, ":\x00"):
		return paramErr("The attribute key must be 1 to 128 printable characters without a colon.")
	}
	return nil
}

// Do sets or deletes the attribute. When the user cannot be determined
// (no token owner, an unauthenticated caller) nothing happens.
func (m *userAttrsModule) Do(ctx context.Context, r *Run) error {
	o := r.Def.Options
	act := strings.ToLower(strings.TrimSpace(r.Def.Action))
	if act != uaActSet && act != uaActDelete {
		return paramErr("Unknown action " + r.Def.Action + " of the handler module " + uaModuleName + ".")
	}
	key := strings.TrimSpace(o[uaOptKey])
	if err := uaCheckKey(key, act); err != nil {
		return err
	}
	if m.s.cfg.Attrs == nil {
		return fmt.Errorf("eventing: custom user attributes are not configured")
	}
	u, ok, err := m.target(ctx, r)
	if err != nil {
		return err
	}
	if !ok {
		m.s.cfg.Log.Warn().Str("component", "eventing").Str("handler", r.Def.Name).Str("action", act).
			Str("request_id", r.Call.Caller.RequestID).Msg("custom user attribute handler: the user could not be determined")
		return nil
	}
	if act == uaActSet {
		_, err = m.s.cfg.Attrs.Set(ctx, u, key, o[uaOptValue], "", r.InTx(ctx))
	} else {
		_, err = m.s.cfg.Attrs.Delete(ctx, u, key, r.InTx(ctx))
	}
	if err != nil {
		return err
	}
	m.s.cfg.Log.Info().Str("component", "eventing").Str("handler", r.Def.Name).Str("action", act).
		Str("user", u.Login).Str("realm", u.Realm).Str("request_id", r.Call.Caller.RequestID).
		Msg("custom user attribute changed")
	return nil
}

// target is the user the definition names: the call's user or token
// owner, or the logged-in user (an administrator of a realm too). ok is
// false when there is none.
func (m *userAttrsModule) target(ctx context.Context, r *Run) (user.User, bool, error) {
	who := strings.TrimSpace(r.Def.Options[uaOptUser])
	if who == "" {
		who = uaUserTokenOwner
	}
	switch who {
	case uaUserTokenOwner:
		u := r.User(ctx)
		return u, u.Login != "", nil
	case uaUserLoggedIn:
		c := r.Call.Caller
		if (c.Role != caller.User && c.Role != caller.Admin) || c.Name == "" || c.Realm == "" {
			return user.User{}, false, nil
		}
		if m.s.cfg.Realms == nil {
			return user.User{}, false, nil
		}
		u, _, err := r.resolve(ctx, user.User{Login: c.Name, Realm: c.Realm, Resolver: c.Resolver})
		if err != nil {
			return user.User{}, false, err
		}
		return u, true, nil
	}
	return user.User{}, false, paramErr(fmt.Sprintf("The option user must be %s or %s.", uaUserTokenOwner, uaUserLoggedIn))
}
