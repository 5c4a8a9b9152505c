package token

import (
	"errors"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// A save whose transaction rolls back leaves its decoding in the cache,
// but the cache answers only for the bytes it was decoded from, so the
// next read sees the stored token.
func TestDecodeCacheRolledBackSave(t *testing.T) {
	svc := New(Config{Store: storetest.Open(t)})
	st, s := svc.cfg.Store, svc
	ctx := t.Context()
	tok := &Token{Serial: "RB1", Type: "hotp", Description: "stored", Info: map[string]string{}}
	if err := st.Update(ctx, func(tx store.Tx) error { return s.save(tx, nil, tok) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("roll back")
	err := st.Update(ctx, func(tx store.Tx) error {
		c := tok.Clone()
		c.Description = "rolled back"
		if err := s.save(tx, tok, c); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	if n := svc.decoded.len(); n != 1 {
		t.Fatalf("the service's cache holds %d entries, want the rolled back one", n)
	}
	var got *Token
	if err := st.View(ctx, func(tx store.Tx) error { var err error; got, err = s.load(tx, "RB1"); return err }); err != nil {
		t.Fatal(err)
	}
	if got.Description != "stored" {
		t.Fatalf("load after a rolled back save: %q", got.Description)
	}
}

// Each Service has its own cache: what one Service reads and writes stays
// in its cache, a second Service on the same store starts empty, and a
// transaction that did not come from a Service reads without a cache.
func TestDecodeCachePerService(t *testing.T) {
	raw := storetest.Open(t)
	a, b := New(Config{Store: raw}), New(Config{Store: raw})
	ctx := t.Context()
	tok := &Token{Serial: "PS1", Type: "hotp", Description: "one", Info: map[string]string{}}
	if err := a.cfg.Store.Update(ctx, func(tx store.Tx) error { return a.save(tx, nil, tok) }); err != nil {
		t.Fatal(err)
	}
	if a.decoded.len() != 1 || b.decoded.len() != 0 {
		t.Fatalf("after a's save: a holds %d, b %d entries; want 1, 0", a.decoded.len(), b.decoded.len())
	}
	if err := raw.View(ctx, func(tx store.Tx) error {
		got, err := (&Service{}).load(tx, "PS1")
		if err == nil && got.Description != "one" {
			t.Errorf("load without a service: %q", got.Description)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "PS1"); err != nil || got.Description != "one" {
		t.Fatalf("b.Get = %v, %v", got, err)
	}
	if a.decoded.len() != 1 || b.decoded.len() != 1 {
		t.Fatalf("after b's read: a holds %d, b %d entries; want 1, 1", a.decoded.len(), b.decoded.len())
	}
	if err := b.cfg.Store.Update(ctx, func(tx store.Tx) error { return b.remove(tx, tok) }); err != nil {
		t.Fatal(err)
	}
	if a.decoded.len() != 1 || b.decoded.len() != 0 {
		t.Fatalf("after b's remove: a holds %d, b %d entries; want 1, 0", a.decoded.len(), b.decoded.len())
	}
	if _, err := a.Get(ctx, "PS1"); err == nil {
		t.Fatal("a.Get found the token b removed")
	}
}
