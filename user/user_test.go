package user_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

var realms = map[string]bool{"realm1": true, "example.com": true, "r2": true}

func isRealm(r string) bool { return realms[r] }

func TestSplit(t *testing.T) {
	cases := []struct {
		in, login, realm string
		atSign           bool
	}{
		{"alice", "alice", "", true},
		{"alice@realm1", "alice", "realm1", true},
		{"alice@REALM1", "alice", "realm1", true},
		{"alice@realm1", "alice@realm1", "", false},
		{"alice@nowhere", "alice@nowhere", "", true},
		{"alice@example.com@realm1", "alice@example.com", "realm1", true},
		{"alice@realm1@nowhere", "alice@realm1@nowhere", "", true},
		{"a@b@example.com", "a@b", "example.com", true},
		{"@realm1", "@realm1", "", true},
		{"alice@", "alice@", "", true},
		{`realm1\alice`, "alice", "realm1", true},
		{`REALM1\alice`, "alice", "realm1", true},
		{`nowhere\alice`, `nowhere\alice`, "", true},
		{`realm1\`, `realm1\`, "", true},
		{`\alice`, `\alice`, "", true},
		{`realm1\alice@r2`, `realm1\alice`, "r2", true},
		{"", "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			login, realm := user.Split(tc.in, isRealm, tc.atSign)
			if login != tc.login || realm != tc.realm {
				t.Errorf("Split(%q) = %q, %q; want %q, %q", tc.in, login, realm, tc.login, tc.realm)
			}
		})
	}
}

func TestString(t *testing.T) {
	if s := (user.User{Login: "eve", Realm: "realm1"}).String(); s != "<eve@realm1>" {
		t.Error(s)
	}
	if s := (user.User{Login: "eve", Realm: "realm1", Resolver: "reso1", UID: "7"}).String(); s != "<eve.reso1@realm1>" {
		t.Error(s)
	}
}

// FuzzSplit: splitting never panics, never invents characters, and a
// split realm is always an existing one.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"alice@realm1", `realm1\bob`, "a@b@r2", "@", `\`, "x@REALM1", "\xff@realm1"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, atSign bool) {
		login, realm := user.Split(s, isRealm, atSign)
		if realm == "" && login != s {
			t.Fatalf("Split(%q) changed the login to %q without a realm", s, login)
		}
		if realm != "" && !realms[realm] {
			t.Fatalf("Split(%q) gave unknown realm %q", s, realm)
		}
		if len(login)+len(realm) > len(s) {
			t.Fatalf("Split(%q) = %q, %q: longer than the input", s, login, realm)
		}
		if utf8.ValidString(s) && !utf8.ValidString(login) {
			t.Fatalf("Split(%q) broke UTF-8: %q", s, login)
		}
	})
}

func TestAttributes(t *testing.T) {
	ctx := t.Context()
	st := storetest.Open(t)
	a := user.NewAttributes(st)
	alice := user.User{Login: "alice", Realm: "realm1", Resolver: "reso1", UID: "1000"}
	bob := user.User{Login: "bob", Realm: "realm1", Resolver: "reso1", UID: "1001"}
	other := user.User{Login: "alice", Realm: "r2", Resolver: "reso1", UID: "1000"}

	id1, err := a.Set(ctx, alice, "department", "sales", "")
	if err != nil || id1 <= 0 {
		t.Fatalf("Set = %d, %v", id1, err)
	}
	id2, err := a.Set(ctx, alice, "department", "marketing", "string")
	if err != nil || id2 != id1 {
		t.Fatalf("overwrite: id %d (want %d), %v", id2, id1, err)
	}
	if _, err := a.Set(ctx, bob, "room", "12", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set(ctx, other, "room", "99", ""); err != nil {
		t.Fatal(err)
	}
	got, err := a.Get(ctx, alice)
	if err != nil || len(got) != 1 || got["department"] != "marketing" {
		t.Fatalf("Get(alice) = %v, %v", got, err)
	}
	if got, _ := a.Get(ctx, user.User{Login: "ghost", Realm: "realm1"}); len(got) != 0 {
		t.Errorf("unknown user: %v", got)
	}

	bad := []struct {
		name, key, value string
		want             error
	}{
		{"empty key", "", "v", user.ErrBadKey},
		{"colon", "a:b", "v", user.ErrBadKey},
		{"control", "a\nb", "v", user.ErrBadKey},
		{"long key", strings.Repeat("k", 129), "v", user.ErrBadKey},
		{"long value", "k", strings.Repeat("v", 4097), user.ErrBadValue},
		{"invalid utf-8", "k", "\xff", user.ErrBadValue},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a.Set(ctx, alice, tc.key, tc.value, ""); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := a.Set(ctx, user.User{Login: "ghost"}, "k", "v", ""); !errors.Is(err, user.ErrNotFound) {
		t.Errorf("unresolved user: %v", err)
	}

	if err := st.View(ctx, func(tx store.Tx) error {
		keys, err := a.RealmKeys(tx, "REALM1")
		if err != nil || strings.Join(keys, ",") != "department,room" {
			t.Errorf("RealmKeys = %v, %v", keys, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Delete(ctx, alice, "department"); n != 1 || err != nil {
		t.Errorf("Delete = %d, %v", n, err)
	}
	if n, _ := a.Delete(ctx, alice, "department"); n != 0 {
		t.Errorf("second Delete = %d", n)
	}
	if err := st.Update(ctx, func(tx store.Tx) error {
		n, err := a.DeleteRealm(tx, "realm1")
		if n != 1 {
			t.Errorf("DeleteRealm removed %d", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Get(ctx, other); got["room"] != "99" {
		t.Error("DeleteRealm touched another realm")
	}
	if ok, _ := a.Exist(ctx); !ok {
		t.Error("Exist = false with an attribute left")
	}
}
