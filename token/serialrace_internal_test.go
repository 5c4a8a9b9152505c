package token

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// hookStore runs before once, ahead of the first Update.
type hookStore struct {
	store.Store
	once   sync.Once
	before func()
}

func (s *hookStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.once.Do(s.before)
	return s.Store.Update(ctx, fn)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestInitGeneratedSerialTakenMeanwhile: when another enrollment takes
// the serial Init generated before Init commits, Init generates another
// and enrolls; a serial the caller chose is refused instead, with
// ErrSerialTaken as the cause.
func TestInitGeneratedSerialTakenMeanwhile(t *testing.T) {
	raw := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	hs := &hookStore{Store: raw}
	// Zero "random" bytes: the serial generated for the first token is
	// known in advance.
	svc := New(Config{Store: hs, Sealer: sealer, Rand: zeroReader{}})
	other := New(Config{Store: raw, Sealer: sealer, Rand: zeroReader{}})
	ctx := t.Context()
	taken, err := svc.NewSerial(ctx, "hotp")
	if err != nil {
		t.Fatal(err)
	}
	hs.before = func() {
		if _, _, err := other.Init(ctx, InitRequest{Type: "hotp", Serial: taken, Params: Params{"otpkey": "3132333435363738393031323334353637383930"}}); err != nil {
			t.Errorf("the concurrent enrollment: %v", err)
		}
	}
	tok, _, err := svc.Init(ctx, InitRequest{Type: "hotp", Params: Params{"otpkey": "3132333435363738393031323334353637383930"}})
	if err != nil {
		t.Fatalf("Init with a generated serial taken meanwhile: %v", err)
	}
	if tok.Serial == taken || tok.Serial == "" {
		t.Fatalf("enrolled as %q, the serial taken meanwhile is %q", tok.Serial, taken)
	}
	for _, serial := range []string{taken, tok.Serial} {
		if ok, err := svc.Exists(ctx, serial); err != nil || !ok {
			t.Errorf("%s exists %v (%v)", serial, ok, err)
		}
	}

	// A serial the caller chose is not changed.
	next, err := svc.NewSerial(ctx, "hotp")
	if err != nil {
		t.Fatal(err)
	}
	hs.once = sync.Once{}
	hs.before = func() {
		if _, _, err := other.Init(ctx, InitRequest{Type: "hotp", Serial: next, Params: Params{"otpkey": "3132333435363738393031323334353637383930"}}); err != nil {
			t.Errorf("the concurrent enrollment: %v", err)
		}
	}
	_, _, err = svc.Init(ctx, InitRequest{Type: "hotp", Serial: next, Params: Params{"otpkey": "3132333435363738393031323334353637383930"}})
	if !errors.Is(err, ErrSerialTaken) {
		t.Fatalf("Init of a chosen serial taken meanwhile: %v, want ErrSerialTaken", err)
	}
}
