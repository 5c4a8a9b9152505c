package resolver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newService(t *testing.T) (*resolver.Service, store.Store, *fakeClock) {
	t.Helper()
	st := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	s := resolver.New(st, sealer, resolver.Registry{resolvertest.MemTypeName: resolvertest.MemType()}, zerolog.Nop(), clk.now)
	t.Cleanup(func() { _ = s.Close() })
	return s, st, clk
}

func TestSaveGetCensor(t *testing.T) {
	ctx := t.Context()
	s, st, _ := newService(t)
	id, err := s.Save(ctx, "Mem1", map[string]string{"type": "memresolver", "Secret": "hunter2", "Editable": "True", "Other": "x"})
	if err != nil || id <= 0 {
		t.Fatalf("Save = %d, %v", id, err)
	}
	d, ok, err := s.Get(ctx, "mem1") // names are case-insensitive
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	if d.Name != "Mem1" || d.Type != "memresolver" || d.ID != id || d.Data["Secret"] != resolver.Censored || d.Data["Other"] != "x" {
		t.Errorf("def %+v", d)
	}
	if strings.Join(d.CensorKeys, ",") != "Secret" {
		t.Errorf("censor keys %v", d.CensorKeys)
	}
	// The secret is sealed at rest.
	_ = st.View(ctx, func(tx store.Tx) error {
		_ = tx.Bucket("resolvers").ForEach(nil, func(_, v []byte) error {
			if bytes.Contains(v, []byte("hunter2")) {
				t.Error("the secret is stored in clear")
			}
			return nil
		})
		return nil
	})

	// Update: Censored keeps the secret, unsent parameters stay, empty
	// deletes, the type cannot change.
	if id2, err := s.Save(ctx, "mem1", map[string]string{"Secret": resolver.Censored, "Other": ""}); err != nil || id2 != id {
		t.Fatalf("update = %d, %v", id2, err)
	}
	d, _, _ = s.Get(ctx, "mem1")
	if _, ok := d.Data["Other"]; ok || d.Data["Editable"] != "True" || d.Data["Secret"] != resolver.Censored {
		t.Errorf("after update %+v", d.Data)
	}
	in, err := s.Instance(ctx, "mem1")
	if err != nil || !in.Editable() {
		t.Fatalf("Instance: %v", err)
	}

	bad := []struct {
		name   string
		params map[string]string
		code   apierr.Code
		text   string
	}{
		{"Mem1", map[string]string{"type": "otherresolver"}, apierr.ConfigAdmin, "resolver type : otherresolver not in [memresolver]"},
		{"new", map[string]string{"Users": "x"}, apierr.Parameter, "Missing parameter: type"},
		{"bad name!", map[string]string{"type": "memresolver"}, apierr.Parameter, "non conformant"},
		{"..", map[string]string{"type": "memresolver"}, apierr.Parameter, "non conformant"},
		{".", map[string]string{"type": "memresolver"}, apierr.Parameter, "non conformant"},
		{"ok", map[string]string{"type": "memresolver", "Users": "not json"}, apierr.Resolver, "Users must be"},
	}
	for _, tc := range bad {
		if _, err := s.Save(ctx, tc.name, tc.params); !apierr.Is(err, tc.code) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Save(%q, %v) = %v; want %v %q", tc.name, tc.params, err, tc.code, tc.text)
		}
	}
	// A type change of an existing resolver with a registered type.
	s2, _, _ := newServiceWithTwoTypes(t)
	if _, err := s2.Save(ctx, "r", map[string]string{"type": "memresolver"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Save(ctx, "r", map[string]string{"type": "mem2"}); err == nil || !strings.Contains(err.Error(), "similar name and other type") {
		t.Errorf("type change: %v", err)
	}
	if list, _ := s.List(ctx, "", false); len(list) != 1 {
		t.Errorf("refused saves left %d definitions", len(list))
	}
}

func newServiceWithTwoTypes(t *testing.T) (*resolver.Service, store.Store, *fakeClock) {
	st := storetest.Open(t)
	sealer, _ := secret.NewSealer(nil, bytes.Repeat([]byte{3}, 32))
	clk := &fakeClock{t: time.Now()}
	m2 := resolvertest.MemType()
	m2.Name = "mem2"
	s := resolver.New(st, sealer, resolver.Registry{resolvertest.MemTypeName: resolvertest.MemType(), "mem2": m2}, zerolog.Nop(), clk.now)
	t.Cleanup(func() { _ = s.Close() })
	return s, st, clk
}

func TestListFiltersAndDelete(t *testing.T) {
	ctx := t.Context()
	s, _, _ := newServiceWithTwoTypes(t)
	mustSave(t, s, "a", map[string]string{"type": "memresolver", "Editable": "1"})
	mustSave(t, s, "b", map[string]string{"type": "memresolver"})
	mustSave(t, s, "c", map[string]string{"type": "mem2"})
	if l, _ := s.List(ctx, "", false); len(l) != 3 {
		t.Errorf("all: %d", len(l))
	}
	if l, _ := s.List(ctx, "mem2", false); len(l) != 1 || l[0].Name != "c" {
		t.Errorf("by type: %+v", l)
	}
	if l, _ := s.List(ctx, "", true); len(l) != 1 || l[0].Name != "a" {
		t.Errorf("editable: %+v", l)
	}
	s.SetUsageCheck(func(tx store.Tx, name string) (string, bool, error) { return "realm1", name == "b", nil })
	if _, err := s.Delete(ctx, "B"); err == nil || err.Error() != "The resolver 'b' is still contained in realm 'realm1'." {
		t.Errorf("delete in use: %v", err)
	}
	if id, err := s.Delete(ctx, "a"); err != nil || id <= 0 {
		t.Errorf("delete: %d %v", id, err)
	}
	if id, err := s.Delete(ctx, "a"); err != nil || id != -1 {
		t.Errorf("delete missing: %d %v", id, err)
	}
	if _, err := s.Instance(ctx, "a"); !errors.Is(err, resolver.ErrNotFound) {
		t.Errorf("instance of a deleted resolver: %v", err)
	}
}

func mustSave(t *testing.T, s *resolver.Service, name string, p map[string]string) {
	t.Helper()
	if _, err := s.Save(t.Context(), name, p); err != nil {
		t.Fatal(err)
	}
}

func TestInstanceCacheAndRebuild(t *testing.T) {
	ctx := t.Context()
	s, _, clk := newService(t)
	mustSave(t, s, "m", map[string]string{"type": "memresolver", "CACHE_TIMEOUT": "60"})
	in, err := s.Instance(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	mem := in.Store().(*resolvertest.Mem)
	for range 5 {
		if _, err := in.UserID(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if mem.Lookups != 1 {
		t.Errorf("%d lookups reached the store, want 1 (cached)", mem.Lookups)
	}
	clk.add(61 * time.Second)
	if _, err := in.UserID(ctx, "alice"); err != nil || mem.Lookups != 2 {
		t.Errorf("after expiry: %d lookups, %v", mem.Lookups, err)
	}
	same, _ := s.Instance(ctx, "m")
	if same != in {
		t.Error("an unchanged definition built a new instance")
	}
	// A config change gives a new instance (and so an empty cache).
	mustSave(t, s, "m", map[string]string{"CACHE_TIMEOUT": "30"})
	fresh, err := s.Instance(ctx, "m")
	if err != nil || fresh == in {
		t.Fatalf("no new instance after a change: %v", err)
	}
	if _, err := fresh.UserID(ctx, "alice"); err != nil || fresh.Store().(*resolvertest.Mem).Lookups != 1 {
		t.Error("the new instance did not start with an empty cache")
	}
	// Unknown users are not cached: they can appear later.
	if _, err := fresh.UserID(ctx, "nobody"); !errors.Is(err, resolver.ErrNoUser) {
		t.Errorf("nobody: %v", err)
	}
}

func TestTestAndHealth(t *testing.T) {
	ctx := t.Context()
	s, _, clk := newService(t)
	mustSave(t, s, "m", map[string]string{"type": "memresolver", "Secret": "s3"})
	v, desc, err := s.Test(ctx, map[string]string{"type": "memresolver"}, "")
	if err != nil || v != true || desc != "Found 4 users." {
		t.Errorf("Test = %v %q %v", v, desc, err)
	}
	v, desc, _ = s.Test(ctx, map[string]string{"Down": "True", "Secret": resolver.Censored}, "m")
	if v != false || desc != "The user store is not available." {
		t.Errorf("Test down = %v %q", v, desc)
	}
	v, desc, _ = s.Test(ctx, map[string]string{"type": "memresolver", "Users": "{"}, "")
	if v != false || !strings.Contains(desc, "Users must be") {
		t.Errorf("Test invalid = %v %q", v, desc)
	}
	h, err := s.Health(ctx)
	if err != nil || h["memresolver"]["m"] != true {
		t.Fatalf("Health = %v %v", h, err)
	}
	mustSave(t, s, "m", map[string]string{"Down": "True"}) // a save drops the cached health
	if h, _ := s.Health(ctx); h["memresolver"]["m"] != false {
		t.Errorf("Health after down = %v", h)
	}
	mustSave(t, s, "m", map[string]string{"Down": ""})
	clk.add(resolver.HealthTTL)
	if h, _ := s.Health(ctx); h["memresolver"]["m"] != true {
		t.Errorf("Health after recovery = %v", h)
	}
}

func TestConcurrentInstances(t *testing.T) {
	s, _, _ := newService(t)
	mustSave(t, s, "m", map[string]string{"type": "memresolver"})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				in, err := s.Instance(context.Background(), "m")
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := in.UserID(context.Background(), "bob"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestInstanceCacheBytes: the user cache stays within MaxCacheBytes
// however large the users are (here 300 users with 64 KiB descriptions,
// about 19 MiB), refilling after it is emptied; forgetting a user gives
// its bytes back.
func TestInstanceCacheBytes(t *testing.T) {
	ctx := t.Context()
	s, _, _ := newService(t)
	mustSave(t, s, "m", map[string]string{"type": "memresolver", "CACHE_TIMEOUT": "600", "Editable": "True"})
	in, err := s.Instance(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	ed, err := in.Editor()
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("d", 64<<10)
	var uids []string
	for i := range 300 {
		uid, err := ed.Create(ctx, map[string]string{resolver.KeyUsername: fmt.Sprintf("big%d", i), resolver.KeyDescription: big})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, uid)
	}
	peak := 0
	for i, uid := range uids {
		if _, err := in.UserID(ctx, fmt.Sprintf("big%d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := in.User(ctx, uid); err != nil {
			t.Fatal(err)
		}
		n := in.CacheBytes()
		if n > resolver.MaxCacheBytes {
			t.Fatalf("the cache holds %d bytes, over %d", n, resolver.MaxCacheBytes)
		}
		peak = max(peak, n)
	}
	if peak < resolver.MaxCacheBytes/2 {
		t.Errorf("the cache peaked at %d bytes: it does not cache", peak)
	}
	before := in.CacheBytes()
	if err := ed.Update(ctx, uids[len(uids)-1], map[string]string{resolver.KeyGivenname: "x"}); err != nil {
		t.Fatal(err)
	}
	if after := in.CacheBytes(); after >= before || after < 0 {
		t.Errorf("forgetting a user: %d bytes before, %d after", before, after)
	}
}
