// Package resolvertest is the conformance kit every user-store type runs:
// a backend's test seeds its store with Users and calls Run. The kit checks
// lookups, searches (including injection attempts), password checks,
// writes for editable stores, concurrency and Close.
package resolvertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/resolver"
)

// User is one user of the standard population.
type User struct {
	Login, Password                          string
	Givenname, Surname, Email, Phone, Mobile string
}

// Users is the population every backend's test seeds before Run: plain
// ASCII, a password with the characters real clients mangle, a non-ASCII
// login, and a login with a dot.
var Users = []User{
	{Login: "alice", Password: "alice-Pw1", Givenname: "Alice", Surname: "Liddell", Email: "alice@example.org", Phone: "+4930111", Mobile: "+49170111"},
	{Login: "bob", Password: "b0b p w%+&=ä", Givenname: "Bob", Surname: "Builder", Email: "bob@example.org", Phone: "+4930222", Mobile: "+49170222"},
	{Login: "müller", Password: "Müller-Pässwort", Givenname: "Hans", Surname: "Müller", Email: "mueller@example.org", Phone: "+4930333", Mobile: "+49170333"},
	{Login: "carol.smith", Password: "c4rol", Givenname: "Carol", Surname: "Smith", Email: "carol@example.org", Phone: "+4930444", Mobile: "+49170444"},
}

// Injection is login and search text that must never match another user
// (shared/spec reliability B3, B4, B5).
var Injection = []string{
	"*", "**", strings.Repeat("a*", 50), ")(uid=*", "*)(|(objectClass=*", `\`, `\2a`, "\x00", "alice\x00",
	"alice)(&)", "alice*", "*lice", "' OR '1'='1", "alice' --", `"; DROP TABLE users;--`, "%", "_lice", "%_%",
	"../Groups", "a/b", "alice?attributes=password", "alice#x", "%2e%2e", `al"ice`, "\xff\xfe", strings.Repeat("x", 4096),
	"ALICE ", " alice",
}

// Options describe what the backend under test can do.
type Options struct {
	// Passwords: the store checks passwords (SCIM cannot).
	Passwords bool
	// SearchKeys are Info keys besides username the store can search.
	SearchKeys []string
	// Editable: the store is configured writable; the write tests run and
	// must leave the population as it was.
	Editable bool
	// Fields are the Info keys the store maps; the default is all of
	// User's.
	Fields []string
}

var allFields = []string{resolver.KeyGivenname, resolver.KeySurname, resolver.KeyEmail, resolver.KeyPhone, resolver.KeyMobile}

func (u User) field(key string) string {
	switch key {
	case resolver.KeyGivenname:
		return u.Givenname
	case resolver.KeySurname:
		return u.Surname
	case resolver.KeyEmail:
		return u.Email
	case resolver.KeyPhone:
		return u.Phone
	case resolver.KeyMobile:
		return u.Mobile
	case resolver.KeyUsername:
		return u.Login
	}
	return ""
}

// has reports whether info's key holds want (as a string or in a list).
func has(info resolver.Info, key, want string) bool {
	switch v := info[key].(type) {
	case string:
		return v == want
	case []string:
		return slices.Contains(v, want)
	}
	return false
}

func logins(list []resolver.Info) []string {
	var out []string
	for _, i := range list {
		out = append(out, i.String(resolver.KeyUsername))
	}
	slices.Sort(out)
	return out
}

// Run checks r's behaviour against the seeded population. open returns a
// store on the seeded backend; each subtest opens its own and closes it.
func Run(t *testing.T, open func(t *testing.T) resolver.Resolver, opt Options) {
	if opt.Fields == nil {
		opt.Fields = allFields
	}
	get := func(t *testing.T) resolver.Resolver {
		t.Helper()
		r := open(t)
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		t.Cleanup(cancel)
		return c
	}

	t.Run("UserID", func(t *testing.T) {
		r, c := get(t), ctx(t)
		seen := map[string]string{}
		for _, u := range Users {
			uid, err := r.UserID(c, u.Login)
			if err != nil || uid == "" {
				t.Fatalf("UserID(%q) = %q, %v", u.Login, uid, err)
			}
			again, err := r.UserID(c, u.Login)
			if err != nil || again != uid {
				t.Errorf("UserID(%q) not stable: %q then %q (%v)", u.Login, uid, again, err)
			}
			if other, dup := seen[uid]; dup {
				t.Errorf("%q and %q share uid %q", u.Login, other, uid)
			}
			seen[uid] = u.Login
		}
	})

	t.Run("UnknownLogin", func(t *testing.T) {
		r, c := get(t), ctx(t)
		for _, login := range []string{"nobody", "alic", "alicex", ""} {
			if uid, err := r.UserID(c, login); !errors.Is(err, resolver.ErrNoUser) {
				t.Errorf("UserID(%q) = %q, %v; want ErrNoUser", login, uid, err)
			}
		}
	})

	t.Run("Injection", func(t *testing.T) {
		r, c := get(t), ctx(t)
		uids := map[string]bool{}
		for _, u := range Users {
			uid, _ := r.UserID(c, u.Login)
			uids[uid] = true
		}
		for _, s := range Injection {
			if uid, err := r.UserID(c, s); err == nil || uids[uid] {
				t.Errorf("UserID(%q) = %q, %v; want no user", s, uid, err)
			}
			list, err := r.Search(c, map[string]string{resolver.KeyUsername: s})
			if err != nil {
				continue // refusing the search is fine
			}
			for _, got := range logins(list) {
				// A wildcard may legitimately match; anything else must not.
				if !strings.Contains(s, "*") {
					t.Errorf("Search(username=%q) matched %q", s, got)
				}
			}
		}
	})

	t.Run("User", func(t *testing.T) {
		r, c := get(t), ctx(t)
		for _, u := range Users {
			uid, err := r.UserID(c, u.Login)
			if err != nil {
				t.Fatal(err)
			}
			info, err := r.User(c, uid)
			if err != nil {
				t.Fatalf("User(%q): %v", uid, err)
			}
			if info.String(resolver.KeyUsername) != u.Login || info.String(resolver.KeyUserID) != uid {
				t.Errorf("User(%q) username %q userid %q", uid, info.String(resolver.KeyUsername), info.String(resolver.KeyUserID))
			}
			for _, f := range opt.Fields {
				if !has(info, f, u.field(f)) {
					t.Errorf("User(%s)[%s] = %#v, want %q", u.Login, f, info[f], u.field(f))
				}
			}
			if _, ok := info[resolver.KeyPassword]; ok {
				t.Errorf("User(%s) returned a password field", u.Login)
			}
		}
	})

	t.Run("UnknownUID", func(t *testing.T) {
		r, c := get(t), ctx(t)
		for _, uid := range []string{"no-such-uid-4711", "uid=nobody,dc=example,dc=org", ""} {
			if info, err := r.User(c, uid); !errors.Is(err, resolver.ErrNoUser) {
				t.Errorf("User(%q) = %v, %v; want ErrNoUser", uid, info, err)
			}
		}
	})

	t.Run("Search", func(t *testing.T) {
		r, c := get(t), ctx(t)
		var want []string
		for _, u := range Users {
			want = append(want, u.Login)
		}
		slices.Sort(want)
		cases := []struct {
			filter map[string]string
			want   []string
		}{
			{map[string]string{}, want},
			{map[string]string{resolver.KeyUsername: "*"}, want},
			{map[string]string{resolver.KeyUsername: "alice"}, []string{"alice"}},
			{map[string]string{resolver.KeyUsername: "al*"}, []string{"alice"}},
			{map[string]string{resolver.KeyUsername: "*.smith"}, []string{"carol.smith"}},
			{map[string]string{resolver.KeyUsername: "müller"}, []string{"müller"}},
			{map[string]string{resolver.KeyUsername: "nobody"}, nil},
			{map[string]string{resolver.KeyUsername: "%"}, nil},
			{map[string]string{resolver.KeyUsername: "_lice"}, nil},
		}
		for _, k := range opt.SearchKeys {
			cases = append(cases, struct {
				filter map[string]string
				want   []string
			}{map[string]string{k: Users[0].field(k)}, []string{Users[0].Login}})
		}
		for _, tc := range cases {
			list, err := r.Search(c, tc.filter)
			if err != nil {
				t.Errorf("Search(%v): %v", tc.filter, err)
				continue
			}
			if got := logins(list); !slices.Equal(got, tc.want) {
				t.Errorf("Search(%v) = %v, want %v", tc.filter, got, tc.want)
			}
			for _, i := range list {
				if i.String(resolver.KeyUserID) == "" {
					t.Errorf("Search(%v) entry without userid: %v", tc.filter, i)
				}
				if _, ok := i[resolver.KeyPassword]; ok {
					t.Errorf("Search(%v) returned a password field", tc.filter)
				}
			}
		}
		if _, err := r.Search(c, map[string]string{"no_such_key": "x"}); !errors.Is(err, resolver.ErrSearchKey) {
			t.Errorf("Search by an unknown key: %v, want ErrSearchKey", err)
		}
	})

	t.Run("Pages", func(t *testing.T) {
		r, c := get(t), ctx(t)
		checkPages(t, c, r, map[string]string{}, Users)
		checkPages(t, c, r, map[string]string{resolver.KeyUsername: "*"}, Users)
		checkPages(t, c, r, map[string]string{resolver.KeyUsername: "*l*"}, slices.DeleteFunc(slices.Clone(Users), func(u User) bool { return !strings.Contains(u.Login, "l") }))
		checkPages(t, c, r, map[string]string{resolver.KeyUsername: "nobody"}, nil)
		if _, err := resolver.SearchPage(c, r, map[string]string{"no_such_key": "x"}, 0, 2); !errors.Is(err, resolver.ErrSearchKey) {
			t.Errorf("SearchPage by an unknown key: %v, want ErrSearchKey", err)
		}
	})

	t.Run("CheckPassword", func(t *testing.T) {
		r, c := get(t), ctx(t)
		for _, u := range Users {
			uid, err := r.UserID(c, u.Login)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := r.CheckPassword(c, uid, u.Password)
			if err != nil || ok != opt.Passwords {
				t.Errorf("CheckPassword(%s, right) = %v, %v; want %v", u.Login, ok, err, opt.Passwords)
			}
			for _, wrong := range []string{"", u.Password + " ", u.Password[:len(u.Password)-1], strings.ToUpper(u.Password), "*"} {
				if ok, err := r.CheckPassword(c, uid, wrong); ok || err != nil {
					t.Errorf("CheckPassword(%s, %q) = %v, %v; want false", u.Login, wrong, ok, err)
				}
			}
		}
		if ok, err := r.CheckPassword(c, "no-such-uid-4711", "x"); ok || err != nil {
			t.Errorf("CheckPassword(unknown uid) = %v, %v", ok, err)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		r, c := get(t), ctx(t)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Go(func() {
				for i := range 20 {
					u := Users[(g+i)%len(Users)]
					uid, err := r.UserID(c, u.Login)
					if err != nil {
						errs <- fmt.Errorf("UserID(%s): %w", u.Login, err)
						return
					}
					info, err := r.User(c, uid)
					if err != nil || info.String(resolver.KeyUsername) != u.Login {
						errs <- fmt.Errorf("User(%s) = %v, %w", uid, info, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		r := get(t)
		c, cancel := context.WithCancel(t.Context())
		cancel()
		done := make(chan struct{})
		go func() {
			_, _ = r.UserID(c, "alice")
			_, _ = r.Search(c, nil)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("calls with a cancelled context did not return")
		}
	})

	t.Run("Editor", func(t *testing.T) {
		r, c := get(t), ctx(t)
		ed, ok := r.(resolver.Editor)
		if !opt.Editable {
			if ok && ed.Editable() {
				t.Fatal("Editable() is true but the options say the store is read-only")
			}
			if ok {
				if _, err := ed.Create(c, map[string]string{resolver.KeyUsername: "kit-new", resolver.KeyPassword: "x"}); !errors.Is(err, resolver.ErrNotEditable) {
					t.Errorf("Create on a read-only store: %v, want ErrNotEditable", err)
				}
			}
			return
		}
		if !ok || !ed.Editable() {
			t.Fatal("the store is not an editable Editor")
		}
		login := fmt.Sprintf("kit-%d", time.Now().UnixNano()%1e9)
		uid, err := ed.Create(c, map[string]string{
			resolver.KeyUsername: login, resolver.KeyGivenname: "Kit", resolver.KeySurname: "Test",
			resolver.KeyEmail: "kit@example.org", resolver.KeyPassword: "first-Pw",
		})
		if err != nil || uid == "" {
			t.Fatalf("Create = %q, %v", uid, err)
		}
		defer func() { _ = ed.Delete(context.Background(), uid) }()
		if got, err := r.UserID(c, login); err != nil || got != uid {
			t.Errorf("UserID(new) = %q, %v; want %q", got, err, uid)
		}
		if opt.Passwords {
			if ok, _ := r.CheckPassword(c, uid, "first-Pw"); !ok {
				t.Error("the created user's password does not verify")
			}
		}
		if err := ed.Update(c, uid, map[string]string{resolver.KeySurname: "Changed", resolver.KeyPassword: "second-Pw"}); err != nil {
			t.Fatalf("Update: %v", err)
		}
		info, err := r.User(c, uid)
		if err != nil || !has(info, resolver.KeySurname, "Changed") || !has(info, resolver.KeyGivenname, "Kit") {
			t.Errorf("after Update: %v, %v", info, err)
		}
		if opt.Passwords {
			if ok, _ := r.CheckPassword(c, uid, "second-Pw"); !ok {
				t.Error("the new password does not verify")
			}
			if ok, _ := r.CheckPassword(c, uid, "first-Pw"); ok {
				t.Error("the old password still verifies")
			}
		}
		if err := ed.Delete(c, uid); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := r.UserID(c, login); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("UserID after Delete: %v", err)
		}
	})

	t.Run("Close", func(t *testing.T) {
		r := open(t)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

// checkPages walks resolver.SearchPage(filter) with every page size from
// 1 to len(want)+1: the pages together list want once each, every page
// but the last says More, a page that reaches the end knows the total,
// the order is the same whatever the page size, and a page past the end
// is empty.
func checkPages(t *testing.T, c context.Context, r resolver.Resolver, filter map[string]string, want []User) {
	t.Helper()
	var wantLogins []string
	for _, u := range want {
		wantLogins = append(wantLogins, u.Login)
	}
	slices.Sort(wantLogins)
	var order []string
	for size := 1; size <= len(want)+1; size++ {
		var got []string
		for offset := 0; ; offset += size {
			p, err := resolver.SearchPage(c, r, filter, offset, size)
			if err != nil {
				t.Fatalf("SearchPage(%v, %d, %d): %v", filter, offset, size, err)
			}
			if len(p.Users) > size {
				t.Fatalf("SearchPage(%v, %d, %d): %d users", filter, offset, size, len(p.Users))
			}
			if p.More && len(p.Users) < size {
				t.Errorf("SearchPage(%v, %d, %d): a short page says More", filter, offset, size)
			}
			for _, u := range p.Users {
				got = append(got, u.String(resolver.KeyUsername))
			}
			if !p.More {
				if p.Total != len(want) {
					t.Errorf("SearchPage(%v, %d, %d): Total %d at the end, want %d", filter, offset, size, p.Total, len(want))
				}
				break
			}
			if offset > 10*len(want)+10 {
				t.Fatalf("SearchPage(%v) never ends", filter)
			}
		}
		if order == nil {
			order = slices.Clone(got)
		} else if !slices.Equal(got, order) {
			t.Errorf("SearchPage(%v) pages of %d list %v, pages of 1 %v", filter, size, got, order)
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if !slices.Equal(sorted, wantLogins) {
			t.Errorf("SearchPage(%v) pages of %d list %v, want %v", filter, size, sorted, wantLogins)
		}
	}
	past, err := resolver.SearchPage(c, r, filter, len(want)+3, 2)
	if err != nil || len(past.Users) != 0 || past.More || past.Total != len(want) {
		t.Errorf("SearchPage(%v) past the end: %d users, More %v, Total %d, %v", filter, len(past.Users), past.More, past.Total, err)
	}
}
