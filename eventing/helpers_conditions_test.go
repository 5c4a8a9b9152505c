package eventing

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// condStart is the condition tests' clock at the start.
var condStart = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// condClock is a settable clock shared by the token service and the
// eventing service.
type condClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *condClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *condClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// condEnv is an eventing service on a real store with a token service,
// realm "realmc" (user store "condres": alice, bob, carol) and realm
// "other" (user store "condres2": dave), custom user attributes, the log
// captured and a settable clock.
type condEnv struct {
	svc    *Service
	st     store.Store
	tokens *token.Service
	realms *realm.Service
	attrs  *user.Attributes
	clock  *condClock
	log    *syncLog
}

const (
	condUsers = `[
		{"username":"alice","password":"x","givenname":"Alice","email":"alice@example.com","created":"2026-01-01T00:00+0000","level":"5"},
		{"username":"bob","password":"x","givenname":"Bob","created":"2026-03-08T00:00+0000","level":"12"},
		{"username":"carol","password":"x","givenname":"Carol"}]`
	condOtherUsers = `[{"username":"dave","password":"x"}]`
)

func newCondEnv(t *testing.T) *condEnv {
	t.Helper()
	ctx := t.Context()
	st := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	clock := &condClock{t: condStart}
	tokens := token.New(token.Config{Store: st, Sealer: sealer, Hasher: hasher, Now: clock.Now})
	res := resolver.New(st, sealer, resolver.Registry{resolvertest.MemTypeName: resolvertest.MemType()}, zerolog.Nop(), clock.Now)
	t.Cleanup(func() { _ = res.Close() })
	for name, users := range map[string]string{"condres": condUsers, "condres2": condOtherUsers} {
		if _, err := res.Save(ctx, name, map[string]string{"type": resolvertest.MemTypeName, "Users": users}); err != nil {
			t.Fatal(err)
		}
	}
	attrs := user.NewAttributes(st)
	realms := realm.New(realm.Config{Store: st, Resolvers: res, Attrs: attrs})
	for name, r := range map[string]string{"realmc": "condres", "other": "condres2"} {
		if _, _, err := realms.Set(ctx, name, []realm.Entry{{Name: r}}); err != nil {
			t.Fatal(err)
		}
	}
	log := &syncLog{}
	s := New(Config{Store: st, Tokens: tokens, Realms: realms, Attrs: attrs,
		Log: zerolog.New(log).Level(zerolog.DebugLevel), Now: clock.Now})
	t.Cleanup(s.Close)
	return &condEnv{svc: s, st: st, tokens: tokens, realms: realms, attrs: attrs, clock: clock, log: log}
}

// user resolves login in realm "realmc".
func (e *condEnv) user(t *testing.T, login string) user.User {
	t.Helper()
	u, _, err := e.realms.Resolve(t.Context(), login, "realmc")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// enroll makes a token of typ (owned by owner when not nil).
func (e *condEnv) enroll(t *testing.T, serial, typ string, owner *user.User) *token.Token {
	t.Helper()
	tok, _, err := e.tokens.Init(t.Context(), token.InitRequest{Type: typ, Serial: serial, Owner: owner,
		Params: token.Params{"genkey": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// update changes the stored token serial.
func (e *condEnv) update(t *testing.T, serial string, fn func(t *token.Token)) {
	t.Helper()
	if _, err := e.tokens.Update(t.Context(), serial, true, func(tok *token.Token) error { fn(tok); return nil }); err != nil {
		t.Fatal(err)
	}
}

// hold evaluates conds for c as a definition's run would.
func (e *condEnv) hold(t *testing.T, conds map[string]string, c *Call) bool {
	t.Helper()
	ok, err := e.holdErr(t.Context(), conds, c)
	if err != nil {
		t.Fatalf("conditions %v: %v", conds, err)
	}
	return ok
}

func (e *condEnv) holdErr(ctx context.Context, conds map[string]string, c *Call) (bool, error) {
	position := Post
	if c.Response == nil {
		position = Pre
	}
	r := &Run{Def: Definition{Name: "cond-test", Conditions: conds, Options: map[string]string{}},
		Call: c, Position: position, svc: e.svc, facts: &facts{}}
	return r.conditionsHold(ctx)
}

// condCheck is one condition case: conds must (not) hold.
type condCheck struct {
	name  string
	conds map[string]string
	want  bool
}

// check runs the cases against the call mk builds (fresh per case).
func (e *condEnv) check(t *testing.T, cases []condCheck, mk func() *Call) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.hold(t, tc.conds, mk()); got != tc.want {
				t.Errorf("conditions %v hold = %v, want %v", tc.conds, got, tc.want)
			}
		})
	}
}

// condAdmin is an administrator calling from 192.0.2.10.
var condAdmin = caller.Caller{Role: caller.Admin, Name: "admin", Client: netip.MustParseAddr("192.0.2.10"), RequestID: "req-cond"}

// condTokenCall is a post call of event on the token serial owned by u.
func condTokenCall(event, serial string, u user.User, res *Response) *Call {
	return &Call{Event: event, Caller: condAdmin, Serial: serial, User: u,
		Params: map[string]any{"serial": serial}, Response: res}
}
