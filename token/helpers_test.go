package token_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
)

var cheap = secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type env struct {
	svc    *token.Service
	st     store.Store
	clock  *clock
	sealer *secret.Sealer
	notify *notify.Service
}

// newEnv returns a token service on a fresh test store with a cheap
// hasher and a clock at 2026-11-22 08:00 UTC.
func newEnv(t testing.TB, mod ...func(*token.Config)) *env {
	t.Helper()
	st := storetest.Open(t)
	h, err := secret.NewHasher(secret.HasherConfig{Params: cheap})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)}
	// The tests' SMTP, SMS and RADIUS servers listen on loopback.
	n := notify.New(notify.Config{Store: st, Sealer: sealer, Now: c.Now, Dial: netguard.MustParse("127.0.0.0/8", "::1/128")})
	cfg := token.Config{Store: st, Sealer: sealer, Hasher: h, Notify: n, Now: c.Now}
	for _, m := range mod {
		m(&cfg)
	}
	return &env{svc: token.New(cfg), st: st, clock: c, sealer: sealer, notify: n}
}

// initToken enrolls a token and fails the test on error.
func (e *env) initToken(t testing.TB, typ, serial string, params token.Params) (*token.Token, map[string]any) {
	t.Helper()
	tok, detail, err := e.svc.Init(context.Background(), token.InitRequest{Type: typ, Serial: serial, Params: params})
	if err != nil {
		t.Fatalf("init %s %s: %v", typ, serial, err)
	}
	return tok, detail
}

const rfcKey = "3132333435363738393031323334353637383930"

func otherSealer(t testing.TB) *secret.Sealer {
	s, err := secret.NewSealer(nil, bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
