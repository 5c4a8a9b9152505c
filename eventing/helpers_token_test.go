package eventing

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// tokStart is the clock of the Token, Counter and CustomUserAttributes
// module tests.
var tokStart = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// tokRFCKey is the RFC 4226 test seed.
const tokRFCKey = "3132333435363738393031323334353637383930"

// tokEnroll is one EnrollToken call the recording host saw.
type tokEnroll struct {
	typ    string
	owner  *user.User
	params map[string]string
}

// tokHost is a Host that records enrollments and answers a fixed serial
// (or err).
type tokHost struct {
	mu       sync.Mutex
	calls    []tokEnroll
	attached []tokAttach
	err      error
}

func (h *tokHost) EnrollToken(_ context.Context, typ string, owner *user.User, params map[string]string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var o *user.User
	if owner != nil {
		c := *owner
		o = &c
	}
	h.calls = append(h.calls, tokEnroll{typ: typ, owner: o, params: maps.Clone(params)})
	if h.err != nil {
		return "", h.err
	}
	return "ENROLLED0001", nil
}

func (h *tokHost) AttachToken(_ context.Context, serial, application, hostname string, options map[string]string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attached = append(h.attached, tokAttach{serial, application, hostname, maps.Clone(options)})
	return h.err
}

// tokAttach is one AttachToken call the recording host saw.
type tokAttach struct {
	serial, application, hostname string
	options                       map[string]string
}

func (h *tokHost) enrollments() []tokEnroll {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]tokEnroll(nil), h.calls...)
}

// tokEnv is an eventing service on a real bbolt store with real token,
// realm, resolver and attribute services.
type tokEnv struct {
	svc    *Service
	st     store.Store
	tokens *token.Service
	realms *realm.Service
	attrs  *user.Attributes
	audit  *audit.Log
	host   *tokHost
}

// newTokEnv builds the environment: realm "realm1" (memresolver "mem1":
// alice with e-mail and mobile, bob) and realm "realm2" (memresolver
// "mem2": carol).
func newTokEnv(t *testing.T) *tokEnv {
	t.Helper()
	ctx := t.Context()
	st := storetest.Open(t)
	now := func() time.Time { return tokStart }
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	res := resolver.New(st, sealer, resolver.Registry{resolvertest.MemTypeName: resolvertest.MemType()}, zerolog.Nop(), now)
	t.Cleanup(func() { _ = res.Close() })
	for name, users := range map[string]string{
		"mem1": `[{"username":"alice","email":"alice@example.org","mobile":"+49170111","givenname":"Alice"},{"username":"bob"}]`,
		"mem2": `[{"username":"carol","email":"carol@example.org"}]`,
	} {
		if _, err := res.Save(ctx, name, map[string]string{"type": resolvertest.MemTypeName, "Users": users}); err != nil {
			t.Fatalf("resolver %s: %v", name, err)
		}
	}
	attrs := user.NewAttributes(st)
	realms := realm.New(realm.Config{
		Store: st, Resolvers: res, Attrs: attrs, LocalNode: "node1",
		NodeExists: func(_ context.Context, id string) (bool, error) { return id == "node1", nil },
	})
	for name, r := range map[string]string{"realm1": "mem1", "realm2": "mem2"} {
		if _, failed, err := realms.Set(ctx, name, []realm.Entry{{Name: r}}); err != nil || len(failed) > 0 {
			t.Fatalf("realm %s: %v %v", name, failed, err)
		}
	}
	tokens := token.New(token.Config{Store: st, Sealer: sealer, Hasher: h, Now: now})
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	al, err := audit.New(audit.Config{Store: st, Key: key, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	host := &tokHost{}
	svc := New(Config{Store: st, Audit: al, Tokens: tokens, Realms: realms, Attrs: attrs, Host: host,
		Log: zerolog.Nop(), Now: now, Node: "node1"})
	t.Cleanup(svc.Close)
	svc.Register(newToken(svc))
	svc.Register(newCounter(svc))
	svc.Register(newCustomUserAttributes(svc))
	return &tokEnv{svc: svc, st: st, tokens: tokens, realms: realms, attrs: attrs, audit: al, host: host}
}

// user resolves login in realm.
func (e *tokEnv) user(t *testing.T, login, realmName string) user.User {
	t.Helper()
	u, _, err := e.realms.Resolve(t.Context(), login, realmName)
	if err != nil {
		t.Fatalf("resolve %s@%s: %v", login, realmName, err)
	}
	return u
}

// hotp enrolls an HOTP token with the RFC 4226 seed, owned by owner when
// it is not nil.
func (e *tokEnv) hotp(t *testing.T, serial string, owner *user.User) *token.Token {
	t.Helper()
	tok, _, err := e.tokens.Init(t.Context(), token.InitRequest{Type: "hotp", Serial: serial, Owner: owner,
		Params: token.Params{"otpkey": tokRFCKey}})
	if err != nil {
		t.Fatalf("init %s: %v", serial, err)
	}
	return tok
}

// get reads a token, failing the test when it is missing.
func (e *tokEnv) get(t *testing.T, serial string) *token.Token {
	t.Helper()
	tok, err := e.tokens.Get(t.Context(), serial)
	if err != nil {
		t.Fatalf("get %s: %v", serial, err)
	}
	return tok
}

// do checks a definition of module with action and options as storing it
// would, then runs it for c as a post handler.
func (e *tokEnv) do(t *testing.T, module, action string, opts map[string]string, c *Call) error {
	t.Helper()
	m, ok := e.svc.Module(module)
	if !ok {
		t.Fatalf("module %s is not registered", module)
	}
	if opts == nil {
		opts = map[string]string{}
	}
	d := Definition{Name: "test " + action, Active: true, Position: Post, HandlerModule: module, Action: action,
		Events: []string{c.Event}, Options: opts, Conditions: map[string]string{}}
	if err := m.Check(t.Context(), d); err != nil {
		t.Fatalf("Check %s %q %v: %v", module, action, opts, err)
	}
	return m.Do(t.Context(), &Run{Def: d, Call: c, Position: Post, svc: e.svc, facts: &facts{}})
}

// mustDo is do that fails the test on an error.
func (e *tokEnv) mustDo(t *testing.T, module, action string, opts map[string]string, c *Call) {
	t.Helper()
	if err := e.do(t, module, action, opts, c); err != nil {
		t.Fatalf("%s %q: %v", module, action, err)
	}
}

// auditActions lists the action column of every audit entry, oldest
// first.
func (e *tokEnv) auditActions(t *testing.T) []string {
	t.Helper()
	res, err := e.audit.Search(t.Context(), audit.Query{Ascending: true, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res.Rows {
		a, _ := r["action"].(string)
		info, _ := r["info"].(string)
		out = append(out, a+" | "+info)
	}
	return out
}

// tokContains reports whether one of list contains sub.
func tokContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
