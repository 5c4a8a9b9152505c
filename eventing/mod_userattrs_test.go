package eventing

import (
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/user"
)

func TestCustomUserAttributesDescription(t *testing.T) {
	e := newTokEnv(t)
	m := newCustomUserAttributes(e.svc)
	if m.Name() != "CustomUserAttributes" || m.DefaultAbort() || !slices.Equal(m.Positions(), []string{"post", "pre"}) {
		t.Fatalf("Name %q DefaultAbort %v Positions %v", m.Name(), m.DefaultAbort(), m.Positions())
	}
	acts, err := m.Actions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if o := acts["set_custom_user_attributes"]["user"]; !o.Required || !slices.Equal(o.Value, []string{"tokenowner", "logged_in_user"}) {
		t.Errorf("set user = %+v", o)
	}
	if _, ok := acts["set_custom_user_attributes"]["attrvalue"]; !ok {
		t.Error("set lacks attrvalue")
	}
	if _, ok := acts["delete_custom_user_attributes"]["attrvalue"]; ok || len(acts) != 2 {
		t.Errorf("actions %v", acts)
	}

	tests := []struct {
		name   string
		action string
		opts   map[string]string
		bad    string
	}{
		{"key missing", "set_custom_user_attributes", map[string]string{"user": "tokenowner"}, "attrkey"},
		{"internal key", "set_custom_user_attributes", map[string]string{"attrkey": "internal_state", "attrvalue": "x"}, "internal"},
		{"internal key delete", "delete_custom_user_attributes", map[string]string{"attrkey": "Internal_x"}, "internal"},
		{"colon", "set_custom_user_attributes", map[string]string{"attrkey": "a:b"}, "colon"},
		{"bad user", "set_custom_user_attributes", map[string]string{"user": "admin", "attrkey": "k"}, "tokenowner"},
		{"ok default user", "set_custom_user_attributes", map[string]string{"attrkey": "dept", "attrvalue": "sales"}, ""},
		{"ok logged in", "delete_custom_user_attributes", map[string]string{"user": "logged_in_user", "attrkey": "dept"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Check(t.Context(), Definition{Action: tc.action, Options: tc.opts})
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !apierr.Is(err, apierr.Parameter) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("error %v, want a parameter error about %q", err, tc.bad)
			}
		})
	}
}

func TestCustomUserAttributesTokenOwner(t *testing.T) {
	e := newTokEnv(t)
	ctx := t.Context()
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)
	attrs := func(u user.User) map[string]string {
		t.Helper()
		m, err := e.attrs.Get(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	// The owner of the call's token (the admin's request names no user).
	e.mustDo(t, "CustomUserAttributes", "set_custom_user_attributes",
		map[string]string{"user": "tokenowner", "attrkey": "dept", "attrvalue": "sales"}, tokAdminCall("token_init", "HOTP1"))
	if got := attrs(alice); got["dept"] != "sales" {
		t.Fatalf("alice's attributes %v", got)
	}
	// The request's user, with the default user choice; the value is
	// replaced.
	c := tokAdminCall("validate_check", "")
	c.User = user.User{Login: "alice", Realm: "realm1"}
	e.mustDo(t, "CustomUserAttributes", "set_custom_user_attributes", map[string]string{"attrkey": "dept", "attrvalue": "it"}, c)
	if got := attrs(alice); got["dept"] != "it" || len(got) != 1 {
		t.Fatalf("alice's attributes %v", got)
	}
	// The handler's attribute shows in the user info the other handlers
	// read.
	if got := e.svc.UserInfo(ctx, alice); got["dept"] != "it" || got["email"] != "alice@example.org" {
		t.Errorf("UserInfo %v", got)
	}

	e.mustDo(t, "CustomUserAttributes", "delete_custom_user_attributes",
		map[string]string{"user": "tokenowner", "attrkey": "dept"}, tokAdminCall("token_init", "HOTP1"))
	if got := attrs(alice); len(got) != 0 {
		t.Fatalf("after delete: %v", got)
	}
	// Deleting a missing attribute is no error.
	e.mustDo(t, "CustomUserAttributes", "delete_custom_user_attributes",
		map[string]string{"attrkey": "dept"}, tokAdminCall("token_init", "HOTP1"))

	// An unowned token: no user, nothing happens.
	e.hotp(t, "FREE1", nil)
	e.mustDo(t, "CustomUserAttributes", "set_custom_user_attributes",
		map[string]string{"attrkey": "dept", "attrvalue": "x"}, tokAdminCall("token_init", "FREE1"))
	if got := attrs(alice); len(got) != 0 {
		t.Fatalf("attributes set without a user: %v", got)
	}
}

func TestCustomUserAttributesLoggedInUser(t *testing.T) {
	e := newTokEnv(t)
	ctx := t.Context()
	alice := e.user(t, "alice", "realm1")
	bob := e.user(t, "bob", "realm1")
	e.hotp(t, "HOTP1", &alice)

	// bob, logged in, acts on alice's token: the attribute is bob's.
	c := tokAdminCall("token_info", "HOTP1")
	c.Caller = caller.Caller{Role: caller.User, Name: "bob", Realm: "realm1"}
	e.mustDo(t, "CustomUserAttributes", "set_custom_user_attributes",
		map[string]string{"user": "logged_in_user", "attrkey": "visited", "attrvalue": "yes"}, c)
	if got, _ := e.attrs.Get(ctx, bob); got["visited"] != "yes" {
		t.Fatalf("bob's attributes %v", got)
	}
	if got, _ := e.attrs.Get(ctx, alice); len(got) != 0 {
		t.Fatalf("alice's attributes %v", got)
	}
	// A local administrator is no user of a realm: nothing happens.
	c.Caller = caller.Caller{Role: caller.Local}
	e.mustDo(t, "CustomUserAttributes", "delete_custom_user_attributes",
		map[string]string{"user": "logged_in_user", "attrkey": "visited"}, c)
	if got, _ := e.attrs.Get(ctx, bob); got["visited"] != "yes" {
		t.Fatalf("bob's attributes %v", got)
	}
	// The logged-in user is looked up in its realm; an unknown one fails.
	c.Caller = caller.Caller{Role: caller.User, Name: "ghost", Realm: "realm1"}
	if err := e.do(t, "CustomUserAttributes", "set_custom_user_attributes",
		map[string]string{"user": "logged_in_user", "attrkey": "k", "attrvalue": "v"}, c); err == nil {
		t.Fatal("an unknown logged-in user got an attribute")
	}
}

func TestCustomUserAttributesInternalRefusedAtRun(t *testing.T) {
	e := newTokEnv(t)
	alice := e.user(t, "alice", "realm1")
	e.hotp(t, "HOTP1", &alice)
	m := newCustomUserAttributes(e.svc)
	d := Definition{Name: "x", Action: "set_custom_user_attributes", Options: map[string]string{"attrkey": "internal_x", "attrvalue": "1"}}
	err := m.Do(t.Context(), &Run{Def: d, Call: tokAdminCall("token_init", "HOTP1"), Position: Post, svc: e.svc, facts: &facts{}})
	if !apierr.Is(err, apierr.Parameter) {
		t.Fatalf("internal key at run time: %v", err)
	}
	if got, _ := e.attrs.Get(t.Context(), alice); len(got) != 0 {
		t.Fatalf("attributes %v", got)
	}
}
