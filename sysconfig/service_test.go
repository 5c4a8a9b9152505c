package sysconfig_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/sysconfig"
)

func newService(t *testing.T, st store.Store, cfg sysconfig.Config) *sysconfig.Service {
	t.Helper()
	cfg.Store = st
	s, err := sysconfig.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func revision(t *testing.T, st store.Store) uint64 {
	t.Helper()
	var rev uint64
	if err := st.View(t.Context(), func(tx store.Tx) error { rev = store.ConfigRevision(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return rev
}

func TestDefaults(t *testing.T) {
	st := storetest.Open(t)
	s := newService(t, st, sysconfig.Config{Defaults: map[string]string{"AutoResync": "True", "DefaultSyncWindow": "500"}})
	sn := s.Current()
	for k, want := range map[string]string{
		"DefaultOtpLen": "6", "AutoResync": "True", "DefaultSyncWindow": "500", "PrependPin": "True",
		"totp.hashlib": "sha1", "email.identifier": "",
	} {
		if got := sn.Value(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if !sn.Bool("AutoResync") || sn.Int("DefaultSyncWindow") != 500 || sn.Stored("AutoResync") {
		t.Errorf("typed reads: %v %d %v", sn.Bool("AutoResync"), sn.Int("DefaultSyncWindow"), sn.Stored("AutoResync"))
	}
	if _, err := sysconfig.New(sysconfig.Config{Store: st, Defaults: map[string]string{"NoSuchKey": "1"}}); err == nil {
		t.Error("a default for an unknown key was accepted")
	}
	k, ok := s.Lookup("DefaultSyncWindow")
	if !ok || k.Default != "500" || k.Kind != sysconfig.Int {
		t.Errorf("Lookup = %+v, %v", k, ok)
	}
}

func TestSetNormalizesAndAnswers(t *testing.T) {
	st := storetest.Open(t)
	s := newService(t, st, sysconfig.Config{})
	ctx := t.Context()
	res, err := s.Set(ctx, []sysconfig.Change{
		{Key: "DefaultOtpLen", Value: " 8 "}, {Key: "splitAtSign", Value: "false"},
		{Key: "totp.hashlib", Value: "SHA256"}, {Key: "OverrideAuthorizationClient", Value: "10.0.0.1, 192.168.0.0/24 > 10.1.0.0/16"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"DefaultOtpLen", "splitAtSign", "totp.hashlib", "OverrideAuthorizationClient"} {
		if res[k] != "insert" {
			t.Errorf("answer[%s] = %q, want insert", k, res[k])
		}
	}
	// Own changes take effect at once.
	sn := s.Current()
	if sn.Value("DefaultOtpLen") != "8" || sn.Value("splitAtSign") != "False" || sn.Value("totp.hashlib") != "sha256" {
		t.Errorf("values = %v", sn.Values())
	}
	res, err = s.Set(ctx, []sysconfig.Change{{Key: "DefaultOtpLen", Value: "6", Desc: "six"}})
	if err != nil || res["DefaultOtpLen"] != "update" {
		t.Fatalf("second set = %v, %v", res, err)
	}
	st2, ok, err := s.Get(ctx, "DefaultOtpLen", false)
	if err != nil || !ok || st2.Value != "6" || !st2.Stored || st2.Description != "six" {
		t.Errorf("Get = %+v, %v, %v", st2, ok, err)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	st := storetest.Open(t)
	s := newService(t, st, sysconfig.Config{})
	ctx := t.Context()
	if _, err := s.Set(ctx, []sysconfig.Change{{Key: "DefaultCountWindow", Value: "20"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		changes []sysconfig.Change
	}{
		{"unknown key", []sysconfig.Change{{Key: "NoSuchKey", Value: "1"}}},
		{"non-integer window", []sysconfig.Change{{Key: "DefaultCountWindow", Value: "ten"}}},
		{"negative max fail count", []sysconfig.Change{{Key: "DefaultMaxFailCount", Value: "-1"}}},
		{"zero max fail count", []sysconfig.Change{{Key: "DefaultMaxFailCount", Value: "0"}}},
		{"otplen 7", []sysconfig.Change{{Key: "DefaultOtpLen", Value: "7"}}},
		{"unknown hash", []sysconfig.Change{{Key: "hotp.hashlib", Value: "md5"}}},
		{"time step 45", []sysconfig.Change{{Key: "totp.timeStep", Value: "45"}}},
		{"boolean yes", []sysconfig.Change{{Key: "AutoResync", Value: "yes"}}},
		{"empty integer", []sysconfig.Change{{Key: "AutoResyncTimeout", Value: ""}}},
		{"bad proxy", []sysconfig.Change{{Key: "OverrideAuthorizationClient", Value: "10.0.0.1, proxy.example"}}},
		{"control character", []sysconfig.Change{{Key: "email.identifier", Value: "mail\nserver"}}},
		{"password type", []sysconfig.Change{{Key: "email.identifier", Value: "x", Type: "password"}}},
		{"twice", []sysconfig.Change{{Key: "AutoResync", Value: "1"}, {Key: "AutoResync", Value: "0"}}},
		{"none", nil},
		{"one bad of several", []sysconfig.Change{{Key: "DefaultCountWindow", Value: "30"}, {Key: "DefaultSyncWindow", Value: "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := revision(t, st)
			_, err := s.Set(ctx, tc.changes)
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("err = %v, want a Parameter error", err)
			}
			if revision(t, st) != before {
				t.Error("the configuration revision moved")
			}
			if got := s.Current().Value("DefaultCountWindow"); got != "20" {
				t.Errorf("DefaultCountWindow = %q", got)
			}
		})
	}
	_, err := s.Set(ctx, []sysconfig.Change{{Key: "NoSuchKey", Value: "1"}})
	if err == nil || !strings.Contains(err.Error(), "NoSuchKey") {
		t.Errorf("the error does not name the key: %v", err)
	}
}

func TestSecondNodeSeesChange(t *testing.T) {
	st := storetest.Open(t)
	a := newService(t, st, sysconfig.Config{})
	b := newService(t, st, sysconfig.Config{})
	if b.Current().Value("DefaultOtpLen") != "6" {
		t.Fatal("default")
	}
	if _, err := a.Set(t.Context(), []sysconfig.Change{{Key: "DefaultOtpLen", Value: "8"}}); err != nil {
		t.Fatal(err)
	}
	// Within the recheck bound b may still answer the old value; after
	// it, the new one.
	b.Age()
	if got := b.Current().Value("DefaultOtpLen"); got != "8" {
		t.Errorf("second node: DefaultOtpLen = %q, want 8", got)
	}
	if _, err := a.Delete(t.Context(), "DefaultOtpLen"); err != nil {
		t.Fatal(err)
	}
	b.Age()
	if got := b.Current().Value("DefaultOtpLen"); got != "6" {
		t.Errorf("second node after delete: DefaultOtpLen = %q, want 6", got)
	}
}

func TestDelete(t *testing.T) {
	st := storetest.Open(t)
	s := newService(t, st, sysconfig.Config{Defaults: map[string]string{"DefaultMaxFailCount": "5"}})
	ctx := t.Context()
	if _, err := s.Set(ctx, []sysconfig.Change{{Key: "DefaultMaxFailCount", Value: "20"}}); err != nil {
		t.Fatal(err)
	}
	var ran int
	n, err := s.Delete(ctx, "DefaultMaxFailCount", func(store.Tx) error { ran++; return nil })
	if err != nil || n != 1 || ran != 1 {
		t.Fatalf("Delete = %d, %v (hook ran %d)", n, err, ran)
	}
	if got := s.Current().Value("DefaultMaxFailCount"); got != "5" {
		t.Errorf("after delete = %q, want the default 5", got)
	}
	before := revision(t, st)
	if n, err := s.Delete(ctx, "DefaultMaxFailCount"); err != nil || n != 0 {
		t.Errorf("second Delete = %d, %v", n, err)
	}
	if revision(t, st) != before {
		t.Error("deleting nothing moved the revision")
	}
	if _, err := s.Delete(ctx, "NoSuchKey"); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("unknown key: %v", err)
	}
}

func TestAlsoFailureStoresNothing(t *testing.T) {
	st := storetest.Open(t)
	s := newService(t, st, sysconfig.Config{})
	boom := errors.New("audit failed")
	_, err := s.Set(t.Context(), []sysconfig.Change{{Key: "DefaultOtpLen", Value: "8"}}, func(store.Tx) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	s.Age()
	if got := s.Current().Value("DefaultOtpLen"); got != "6" {
		t.Errorf("DefaultOtpLen = %q after a failed hook", got)
	}
}

func TestPublicSettings(t *testing.T) {
	st := storetest.Open(t)
	s := newService(t, st, sysconfig.Config{})
	ctx := t.Context()
	list, err := s.List(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	want := []string{"IncFailCountOnFalsePin", "PrependPin", "ReturnSamlAttributes", "splitAtSign"}
	if !slices.Equal(names, want) {
		t.Errorf("public = %v, want %v", names, want)
	}
	if _, ok, _ := s.Get(ctx, "DefaultOtpLen", true); ok {
		t.Error("a user reads DefaultOtpLen")
	}
	if _, err := s.Set(ctx, []sysconfig.Change{{Key: "DefaultOtpLen", Value: "8", Type: "public"}}); err != nil {
		t.Fatal(err)
	}
	if st, ok, _ := s.Get(ctx, "DefaultOtpLen", true); !ok || st.Value != "8" {
		t.Errorf("a setting stored as public is not readable by users: %+v %v", st, ok)
	}
	all, err := s.List(ctx, false)
	if err != nil || len(all) != len(sysconfig.Builtin()) {
		t.Errorf("admin list has %d settings, want %d (%v)", len(all), len(sysconfig.Builtin()), err)
	}
}

func TestOptionalKeysListedWhenStored(t *testing.T) {
	st := storetest.Open(t)
	k := sysconfig.ChallengeValidityKey("hotp")
	if k.Name != "HotpChallengeValidityTime" {
		t.Fatalf("name = %s", k.Name)
	}
	s := newService(t, st, sysconfig.Config{Extra: []sysconfig.Key{k}})
	list, _ := s.List(t.Context(), false)
	if slices.ContainsFunc(list, func(e sysconfig.Setting) bool { return e.Name == k.Name }) {
		t.Error("an unset optional key is listed")
	}
	if _, err := s.Set(t.Context(), []sysconfig.Change{{Key: k.Name, Value: "60"}}); err != nil {
		t.Fatal(err)
	}
	list, _ = s.List(t.Context(), false)
	if !slices.ContainsFunc(list, func(e sysconfig.Setting) bool { return e.Name == k.Name && e.Value == "60" }) {
		t.Error("a stored optional key is not listed")
	}
}

func TestDeriveOncePerSnapshotAndCheckHook(t *testing.T) {
	st := storetest.Open(t)
	var derived atomic.Int32
	s := newService(t, st, sysconfig.Config{
		Derive: func(sn *sysconfig.Snapshot) any { derived.Add(1); v := sn.Value("DefaultOtpLen"); return &v },
		Check: func(_ context.Context, key, value string) error {
			if key == "email.identifier" && value != "mail1" {
				return apierr.Newf(apierr.Parameter, "no SMTP server %q", value)
			}
			return nil
		},
	})
	for range 100 {
		if got := *s.Current().Derived().(*string); got != "6" {
			t.Fatalf("derived = %s", got)
		}
	}
	if n := derived.Load(); n != 1 {
		t.Errorf("derived %d times for one snapshot", n)
	}
	if _, err := s.Set(t.Context(), []sysconfig.Change{{Key: "email.identifier", Value: "nosuch"}}); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("Check hook not applied: %v", err)
	}
	if _, err := s.Set(t.Context(), []sysconfig.Change{{Key: "email.identifier", Value: "mail1"}, {Key: "DefaultOtpLen", Value: "8"}}); err != nil {
		t.Fatal(err)
	}
	if got := *s.Current().Derived().(*string); got != "8" {
		t.Errorf("derived after change = %s", got)
	}
}

func TestCurrentDoesNotAllocate(t *testing.T) {
	st := storetest.Open(t)
	s := newService(t, st, sysconfig.Config{Derive: func(sn *sysconfig.Snapshot) any { return sn }})
	s.Current()
	if n := testing.AllocsPerRun(1000, func() { _ = s.Current().Derived().(*sysconfig.Snapshot) }); n != 0 {
		t.Errorf("Current allocates %v times", n)
	}
}

func BenchmarkCurrent(b *testing.B) {
	st := storetest.Open(b)
	s, _ := sysconfig.New(sysconfig.Config{Store: st})
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Current().Value("DefaultOtpLen")
	}
}
