package eventing

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// ntEnv is an eventing service for the notification modules' tests, on a
// real store, with a token service, a memory user store in realm
// "realm1" (alice, bob, carol) and one in the superuser realm "admins"
// (root, ops, nomail), a notification service that may dial loopback and
// the log captured.
type ntEnv struct {
	svc    *Service
	st     store.Store
	notify *notify.Service
	tokens *token.Service
	realms *realm.Service
	log    *syncLog
	spool  string
}

// ntNow is the test clock's time.
var ntNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const (
	ntRealm1Users = `[
		{"username":"alice","password":"x","givenname":"Alice","surname":"Smith","email":"alice@example.com","mobile":"+49 170 1111"},
		{"username":"bob","password":"x","givenname":"Bob","surname":"<b>Jones</b>","email":"bob@example.com","mobile":"+49 170 2222","altmail":"bob.alt@example.org"},
		{"username":"carol","password":"x","givenname":"Carol"}]`
	ntAdminUsers = `[
		{"username":"root","password":"x","email":"root@example.com"},
		{"username":"ops","password":"x","email":"ops@example.com"},
		{"username":"nomail","password":"x"}]`
)

func newNtEnv(t *testing.T, edit ...func(*Config)) *ntEnv {
	t.Helper()
	ctx := t.Context()
	st := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return ntNow }
	n := notify.New(notify.Config{Store: st, Sealer: sealer, Now: now, Dial: netguard.MustParse("127.0.0.0/8", "::1/128")})
	tokens := token.New(token.Config{Store: st, Sealer: sealer, Hasher: hasher, Notify: n, Now: now})
	res := resolver.New(st, sealer, resolver.Registry{resolvertest.MemTypeName: resolvertest.MemType()}, zerolog.Nop(), now)
	t.Cleanup(func() { _ = res.Close() })
	for name, users := range map[string]string{"mem1": ntRealm1Users, "memadm": ntAdminUsers} {
		if _, err := res.Save(ctx, name, map[string]string{"type": resolvertest.MemTypeName, "Users": users}); err != nil {
			t.Fatal(err)
		}
	}
	attrs := user.NewAttributes(st)
	realms := realm.New(realm.Config{Store: st, Resolvers: res, Attrs: attrs, Superusers: []string{"admins"}})
	if _, _, err := realms.Set(ctx, "realm1", []realm.Entry{{Name: "mem1"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := realms.Set(ctx, "admins", []realm.Entry{{Name: "memadm"}}); err != nil {
		t.Fatal(err)
	}
	buf := &syncLog{}
	cfg := Config{
		Store: st, Tokens: tokens, Realms: realms, Attrs: attrs, Notify: n,
		Log: zerolog.New(buf).Level(zerolog.DebugLevel), Now: now,
		SpoolDir: t.TempDir(), URL: "https://auth.example.com/",
	}
	for _, f := range edit {
		f(&cfg)
	}
	s := New(cfg)
	s.Register(newUserNotification(s))
	s.Register(newWebHook(s))
	s.Register(newLogging(s))
	t.Cleanup(s.Close)
	return &ntEnv{svc: s, st: st, notify: n, tokens: tokens, realms: realms, log: buf, spool: cfg.SpoolDir}
}

// token enrolls an HOTP token serial owned by alice@realm1.
func (e *ntEnv) token(t *testing.T, serial, description string) {
	t.Helper()
	owner, _, err := e.realms.Resolve(t.Context(), "alice", "realm1")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.tokens.Init(t.Context(), token.InitRequest{Type: "hotp", Serial: serial, Owner: &owner,
		Params: token.Params{"genkey": "1", "description": description}})
	if err != nil {
		t.Fatal(err)
	}
}

// ntAdminCall is a post call of admin "super" (realm "admins") enrolling
// serial for alice@realm1, answered with detail.
func ntAdminCall(serial string, detail map[string]any) *Call {
	return &Call{
		Event: "token_init", Method: "POST", Path: "/token/init",
		Caller: caller.Caller{Role: caller.Admin, Name: "super", Realm: "admins",
			Client: netip.MustParseAddr("192.0.2.7"), UserAgent: "Mozilla/5.0 (X11; Linux)", RequestID: "req-1"},
		User:     user.User{Login: "alice", Realm: "realm1"},
		Serial:   serial,
		Params:   map[string]any{"serial": serial, "user": "alice"},
		Response: &Response{Status: true, Value: true, Detail: detail},
		Entry:    audit.Entry{Action: "POST /token/init"},
	}
}

// run builds the run of a definition of module for call c.
func (e *ntEnv) run(module, action string, opts map[string]string, c *Call) *Run {
	return &Run{Def: Definition{Name: "def-" + action, HandlerModule: module, Action: action, Options: opts, Active: true},
		Call: c, Position: Post, svc: e.svc, facts: &facts{}}
}

// check runs the module's Check on a definition with opts.
func (e *ntEnv) check(t *testing.T, module, action string, opts map[string]string) error {
	t.Helper()
	m, ok := e.svc.Module(module)
	if !ok {
		t.Fatalf("module %s is not registered", module)
	}
	return m.Check(t.Context(), Definition{Name: "d", HandlerModule: module, Action: action, Options: opts})
}

// do runs the module's Do for r.
func (e *ntEnv) do(t *testing.T, r *Run) error {
	t.Helper()
	m, ok := e.svc.Module(r.Def.HandlerModule)
	if !ok {
		t.Fatalf("module %s is not registered", r.Def.HandlerModule)
	}
	return m.Do(t.Context(), r)
}

// ntMail is a received message, decoded.
type ntMail struct {
	header mail.Header
	// parts are the decoded text parts by media type.
	parts map[string]string
}

// ntParseMail decodes a message the SMTP sink received.
func ntParseMail(t *testing.T, data string) ntMail {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatalf("read message: %v\n%s", err, data)
	}
	out := ntMail{header: msg.Header, parts: map[string]string{}}
	var walk func(h map[string][]string, r io.Reader)
	walk = func(h map[string][]string, r io.Reader) {
		get := func(k string) string {
			if v := h[k]; len(v) > 0 {
				return v[0]
			}
			return ""
		}
		mt, params, err := mime.ParseMediaType(get("Content-Type"))
		if err != nil {
			mt = "text/plain"
		}
		if strings.HasPrefix(mt, "multipart/") {
			mr := multipart.NewReader(r, params["boundary"])
			for {
				p, err := mr.NextRawPart()
				if err != nil {
					return
				}
				walk(p.Header, p)
			}
		}
		if strings.EqualFold(get("Content-Transfer-Encoding"), "quoted-printable") {
			r = quotedprintable.NewReader(r)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("read part: %v", err)
		}
		out.parts[mt] = string(b)
	}
	walk(msg.Header, msg.Body)
	return out
}

// subject is the decoded subject.
func (m ntMail) subject(t *testing.T) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(m.header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ntWaitFor polls cond until it holds or the deadline passes.
func ntWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
