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
	st := storetest.Open(t)
	ctx := t.Context()
	tok := &Token{Serial: "RB1", Type: "hotp", Description: "stored", Info: map[string]string{}}
	if err := st.Update(ctx, func(tx store.Tx) error { return save(tx, nil, tok) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("roll back")
	err := st.Update(ctx, func(tx store.Tx) error {
		c := tok.Clone()
		c.Description = "rolled back"
		if err := save(tx, tok, c); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	var got *Token
	if err := st.View(ctx, func(tx store.Tx) error { var err error; got, err = load(tx, "RB1"); return err }); err != nil {
		t.Fatal(err)
	}
	if got.Description != "stored" {
		t.Fatalf("load after a rolled back save: %q", got.Description)
	}
}
