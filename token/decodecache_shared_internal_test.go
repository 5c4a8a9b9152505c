package token

import (
	"errors"
	"reflect"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// Update, Commit and FailAll read the cached decoding without copying it
// and change only their own copy: the cached token stays as it was read,
// whether the change commits, rolls back or runs again.
func TestSharedLoadNeverChangesTheCachedToken(t *testing.T) {
	svc := New(Config{Store: storetest.Open(t)})
	st, ctx := svc.cfg.Store, t.Context()
	tok := &Token{Serial: "SH1", Type: "hotp", Active: true, MaxFail: 10, Count: 5, Info: map[string]string{"k": "v"},
		Realms: []string{"r"}, Owner: &user.User{Login: "l", Realm: "r", Resolver: "x", UID: "1"},
		PINSealed: []byte{1}, Sealed: map[string][]byte{"otpkey": {1, 2, 3}}}
	if err := st.Update(ctx, func(tx store.Tx) error { return svc.save(tx, nil, tok) }); err != nil {
		t.Fatal(err)
	}
	shared := func() *Token {
		var got *Token
		if err := st.View(ctx, func(tx store.Tx) error { var err error; got, err = svc.loadShared(tx, "SH1"); return err }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	mutate := func(t *Token) {
		t.Count += 100
		t.Description = "changed"
		t.Info["k"] = "changed"
		t.Info["new"] = "x"
		t.Realms[0] = "changed"
		t.Owner.Login = "changed"
		t.PINSealed[0] = 9
		t.Sealed["otpkey"][0] = 9
		t.Sealed["other"] = []byte{4}
	}
	first := shared()
	if again := shared(); again != first {
		t.Fatal("loadShared copied the cached token")
	}
	want := first.Clone()
	boom := errors.New("roll back")
	if _, err := svc.Update(ctx, "SH1", false, func(t *Token) error { mutate(t); return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("a rolled back Update changed the cached token: %+v", first)
	}
	runs := 0
	got, err := svc.Update(ctx, "SH1", false, func(t *Token) error {
		runs++
		if t.Count != 5 || t.Info["k"] != "v" {
			t.Count = 0 // make the failure visible below
		}
		mutate(t)
		return nil
	})
	if err != nil || runs == 0 || got.Count != 105 {
		t.Fatalf("Update = %+v, %v after %d runs", got, err, runs)
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("an Update changed the token another reader holds: %+v", first)
	}
	second := shared()
	if second.Count != 105 || second.Info["k"] != "changed" {
		t.Fatalf("after the Update the cache holds %+v", second)
	}
	want = second.Clone()
	got.Info["after"] = "the caller's copy is its own"
	if c, err := svc.Commit(ctx, "SH1", Match{OK: true, Apply: func(t *Token) bool { mutate(t); return true }}); err != nil || c.Count != 205 {
		t.Fatalf("Commit = %+v, %v", c, err)
	}
	if err := svc.FailAll(ctx, []Failure{{Serial: "SH1", Change: mutate}}, true, nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second, want) {
		t.Fatalf("Commit or FailAll changed the token another reader holds: %+v", second)
	}
	fresh, err := New(Config{Store: st}).Get(ctx, "SH1")
	if err != nil || fresh.Count != 305 || fresh.FailCount != 1 || fresh.Info["after"] != "" {
		t.Fatalf("stored after Commit and FailAll: %+v, %v", fresh, err)
	}
	if cached := shared(); !reflect.DeepEqual(cached, fresh) {
		t.Fatalf("the cache holds\n%+v\nthe store\n%+v", cached, fresh)
	}
}
