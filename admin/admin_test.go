package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/admin"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

var cheap = secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}

func newService(t *testing.T, p secret.Params) (*admin.Service, store.Store) {
	t.Helper()
	h, err := secret.NewHasher(secret.HasherConfig{Params: p})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t)
	now := func() time.Time { return time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC) }
	return admin.New(st, h, now), st
}

func TestAccounts(t *testing.T) {
	ctx := t.Context()
	s, _ := newService(t, cheap)
	if err := s.Add(ctx, "alice", "secret-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "bob", "secret-2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "alice", "other"); !errors.Is(err, admin.ErrExists) {
		t.Fatalf("duplicate add: %v", err)
	}
	check := func(name, pw string, want bool) {
		t.Helper()
		ok, err := s.Check(ctx, name, pw)
		if err != nil || ok != want {
			t.Errorf("Check(%q, %q) = %v, %v; want %v", name, pw, ok, err, want)
		}
	}
	check("alice", "secret-1", true)
	check("alice", "secret-2", false)
	check("alice", "", false)
	check("nobody", "secret-1", false)
	check("", "", false)
	check("alice", strings.Repeat("x", 5000), false)

	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alice" || list[1].Name != "bob" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if n, _ := s.Count(ctx); n != 2 {
		t.Errorf("Count = %d", n)
	}
	if err := s.SetPassword(ctx, "alice", "new-pw"); err != nil {
		t.Fatal(err)
	}
	check("alice", "secret-1", false)
	check("alice", "new-pw", true)
	if err := s.SetPassword(ctx, "nobody", "x"); !errors.Is(err, admin.ErrNotFound) {
		t.Errorf("SetPassword unknown: %v", err)
	}
	if err := s.Delete(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "bob"); !errors.Is(err, admin.ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	if ok, _ := s.Exists(ctx, "bob"); ok {
		t.Error("bob still exists")
	}
	check("bob", "secret-2", false)
}

func TestBadInputChangesNothing(t *testing.T) {
	ctx := t.Context()
	s, _ := newService(t, cheap)
	cases := []struct {
		name, user, pw string
		want           error
	}{
		{"empty name", "", "pw", admin.ErrBadName},
		{"space in name", "a b", "pw", admin.ErrBadName},
		{"control char", "a\nb", "pw", admin.ErrBadName},
		{"invalid utf-8", "a\xffb", "pw", admin.ErrBadName},
		{"long name", strings.Repeat("a", 65), "pw", admin.ErrBadName},
		{"empty password", "carol", "", admin.ErrBadPass},
		{"long password", "carol", strings.Repeat("p", 1025), admin.ErrBadPass},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Add(ctx, tc.user, tc.pw)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !apierr.Is(err, apierr.Parameter) {
				t.Errorf("not a parameter error: %v", err)
			}
		})
	}
	if n, _ := s.Count(ctx); n != 0 {
		t.Errorf("%d accounts after refused adds", n)
	}
}

// TestRehash: a hash made with other parameters (as imported from
// privacyIDEA) verifies and is replaced by one with the configured ones.
func TestRehash(t *testing.T) {
	ctx := t.Context()
	other := cheap
	other.Time = 2
	old, st := newService(t, other)
	if err := old.Add(ctx, "alice", "pw"); err != nil {
		t.Fatal(err)
	}
	h, _ := secret.NewHasher(secret.HasherConfig{Params: cheap})
	s := admin.New(st, h, time.Now)
	before := rawHash(t, st)
	if !strings.Contains(before, "t=2") {
		t.Fatalf("fixture hash %q", before)
	}
	if ok, err := s.Check(ctx, "alice", "pw"); !ok || err != nil {
		t.Fatalf("Check = %v, %v", ok, err)
	}
	after := rawHash(t, st)
	if !strings.Contains(after, "t=1") {
		t.Errorf("hash not upgraded: %q", after)
	}
	if ok, _ := s.Check(ctx, "alice", "pw"); !ok {
		t.Error("upgraded hash does not verify")
	}
}

func rawHash(t *testing.T, st store.Store) string {
	t.Helper()
	var rec struct {
		Hash string `json:"hash"`
	}
	if err := st.View(t.Context(), func(tx store.Tx) error {
		return store.GetJSON(tx.Bucket("admins"), []byte("alice"), &rec)
	}); err != nil {
		t.Fatal(err)
	}
	return rec.Hash
}

// TestConcurrentAdd: of many parallel adds of one name exactly one wins.
func TestConcurrentAdd(t *testing.T) {
	s, _ := newService(t, cheap)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 16 {
		wg.Go(func() {
			if err := s.Add(context.Background(), "same", "pw"); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, admin.ErrExists) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d adds won", wins)
	}
}

// TestCancelledContext: a request that gave up stores nothing.
func TestCancelledContext(t *testing.T) {
	h, err := secret.NewHasher(secret.HasherConfig{Params: cheap, BudgetBytes: 1 << 20, MaxWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t)
	s := admin.New(st, h, time.Now)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Add(ctx, "alice", "pw"); err == nil {
		t.Fatal("Add with a cancelled context succeeded")
	}
	if n, _ := s.Count(t.Context()); n != 0 {
		t.Errorf("%d accounts", n)
	}
}

// TestSessions: a session stamp from a login stays valid until the
// account's password changes, it is disabled or deleted; a new account of
// the same name has a new stamp; enabling does not bring old sessions
// back; an account written before stamps existed keeps its sessions
// (none carry a stamp) until its first change.
func TestSessions(t *testing.T) {
	ctx := t.Context()
	s, st := newService(t, cheap)
	if err := s.Add(ctx, "alice", "pw-1"); err != nil {
		t.Fatal(err)
	}
	login := func(pw string) string {
		t.Helper()
		stamp, ok, err := s.Login(ctx, "alice", pw)
		if err != nil || !ok || stamp == "" {
			t.Fatalf("Login = %q, %v, %v", stamp, ok, err)
		}
		return stamp
	}
	valid := func(stamp string, want bool) {
		t.Helper()
		if ok, err := s.Session(ctx, "alice", stamp); err != nil || ok != want {
			t.Errorf("Session(%q) = %v, %v; want %v", stamp, ok, err, want)
		}
	}
	first := login("pw-1")
	if again := login("pw-1"); again != first {
		t.Error("two logins without a change have different stamps")
	}
	valid(first, true)
	valid("", false)
	valid(first+"x", false)
	if ok, _ := s.Session(ctx, "bob", first); ok {
		t.Error("a stamp is valid for another name")
	}

	if err := s.SetPassword(ctx, "alice", "pw-2"); err != nil {
		t.Fatal(err)
	}
	valid(first, false)
	second := login("pw-2")
	valid(second, true)

	if err := s.SetDisabled(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	valid(second, false)
	if stamp, ok, err := s.Login(ctx, "alice", "pw-2"); ok || err != nil || stamp != "" {
		t.Errorf("a disabled account logs in: %q %v %v", stamp, ok, err)
	}
	if list, _ := s.List(ctx); len(list) != 1 || !list[0].Disabled {
		t.Errorf("List = %+v", list)
	}
	if err := s.SetDisabled(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	valid(second, false)
	third := login("pw-2")
	valid(third, true)
	if err := s.SetDisabled(ctx, "nobody", true); !errors.Is(err, admin.ErrNotFound) {
		t.Errorf("disable unknown: %v", err)
	}

	if err := s.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	valid(third, false)
	if err := s.Add(ctx, "alice", "pw-2"); err != nil {
		t.Fatal(err)
	}
	valid(third, false)

	// A record from before stamps: tokens without a stamp stay valid.
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.Bucket("admins").Put([]byte("old"), []byte(`{"schema":1,"name":"old","hash":"`+rawHash(t, st)+`"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Session(ctx, "old", ""); err != nil || !ok {
		t.Errorf("pre-stamp account's session: %v %v", ok, err)
	}
	if err := s.SetPassword(ctx, "old", "pw-3"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Session(ctx, "old", ""); ok {
		t.Error("a pre-stamp session survived a password change")
	}
}

// BenchmarkSession is the per-request cost of checking a local
// administrator's session (one store read).
func BenchmarkSession(b *testing.B) {
	h, err := secret.NewHasher(secret.HasherConfig{Params: cheap})
	if err != nil {
		b.Fatal(err)
	}
	s := admin.New(storetest.Open(b), h, time.Now)
	if err := s.Add(b.Context(), "alice", "pw"); err != nil {
		b.Fatal(err)
	}
	stamp, _, _ := s.Login(b.Context(), "alice", "pw")
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := s.Session(b.Context(), "alice", stamp); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// TestAdopt keeps the password of an account brought over with another
// system's peppered hash: the password verifies with the pepper, the first
// login re-hashes it without, and the pepper never shows.
func TestAdopt(t *testing.T) {
	ctx := t.Context()
	s, st := newService(t, cheap)
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 2, Memory: 2048, Threads: 1, KeyLen: 16, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	pepper := []byte("pepper-0123456789")
	phc, err := h.Hash(ctx, string(pepper)+"old-pw")
	if err != nil {
		t.Fatal(err)
	}
	raw := func(name string) map[string]any {
		t.Helper()
		var rec map[string]any
		if err := st.View(ctx, func(tx store.Tx) error { return store.GetJSON(tx.Bucket("admins"), []byte(name), &rec) }); err != nil {
			t.Fatal(err)
		}
		return rec
	}

	t.Run("Refused", func(t *testing.T) {
		for _, c := range []struct {
			name, phc string
			pepper    []byte
			want      error
		}{
			{"bad name", phc, pepper, admin.ErrBadName},
			{"x", "$pbkdf2-sha256$29000$c2FsdA$aGFzaA", pepper, admin.ErrBadHash},
			{"x", "not a hash", pepper, admin.ErrBadHash},
			{"x", phc, []byte(strings.Repeat("p", admin.MaxPepperLen+1)), admin.ErrBadPepper},
		} {
			if err := s.Adopt(ctx, c.name, c.phc, c.pepper); !errors.Is(err, c.want) {
				t.Errorf("Adopt(%q, %q) = %v, want %v", c.name, c.phc, err, c.want)
			}
		}
	})

	if err := s.Adopt(ctx, "imported", phc, pepper); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, "imported", phc, pepper); !errors.Is(err, admin.ErrExists) {
		t.Errorf("second Adopt: %v", err)
	}
	if rec := raw("imported"); rec["hash"] != phc || rec["pepper"] == nil || rec["stamp"] == "" {
		t.Fatalf("adopted record: hash kept %v, pepper kept %v", rec["hash"] == phc, rec["pepper"] != nil)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if b, _ := json.Marshal(list); strings.Contains(string(b), "pepper") {
		t.Errorf("List shows the pepper: %s", b)
	}

	for _, pw := range []string{"", "wrong", string(pepper) + "old-pw", "old-p"} {
		if ok, err := s.Check(ctx, "imported", pw); err != nil || ok {
			t.Errorf("Check(%q) = %v, %v", pw, ok, err)
		}
	}
	if rec := raw("imported"); rec["pepper"] == nil || rec["hash"] != phc {
		t.Fatal("failed logins changed the adopted record")
	}
	if ok, err := s.Check(ctx, "imported", "old-pw"); err != nil || !ok {
		t.Fatalf("Check(old-pw) = %v, %v", ok, err)
	}
	rec := raw("imported")
	if _, has := rec["pepper"]; has || rec["hash"] == phc || !strings.Contains(rec["hash"].(string), "m=1024,t=1,p=1") {
		t.Fatalf("after the first login: pepper kept %v, hash %v", has, rec["hash"])
	}
	if ok, err := s.Check(ctx, "imported", "old-pw"); err != nil || !ok {
		t.Fatalf("Check after the re-hash = %v, %v", ok, err)
	}

	// A password change drops the pepper too.
	if err := s.Adopt(ctx, "other", phc, pepper); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, "other", "new-pw"); err != nil {
		t.Fatal(err)
	}
	if _, has := raw("other")["pepper"]; has {
		t.Error("SetPassword kept the pepper")
	}
	if ok, err := s.Check(ctx, "other", "new-pw"); err != nil || !ok {
		t.Errorf("Check(new-pw) = %v, %v", ok, err)
	}

	// Without a pepper the hash is the password's own.
	plain, err := h.Hash(ctx, "plain-pw")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, "plain", plain, nil); err != nil {
		t.Fatal(err)
	}
	if _, has := raw("plain")["pepper"]; has {
		t.Error("a nil pepper is stored")
	}
	if ok, err := s.Check(ctx, "plain", "plain-pw"); err != nil || !ok {
		t.Errorf("Check(plain-pw) = %v, %v", ok, err)
	}
}
