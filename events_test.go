package authsrv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

var local = caller.Caller{}

func setEvent(t *testing.T, s *authsrv.Server, d eventing.Definition) int {
	t.Helper()
	d.Active = true
	id, err := s.Ops().SetEventDefinition(t.Context(), local, d, false)
	if err != nil {
		t.Fatalf("definition %s: %v", d.Name, err)
	}
	return id
}

// TestEventScenariosLibrary runs the scenarios through the
// library alone: the same definitions act for a Go program's calls.
func TestEventScenariosLibrary(t *testing.T) {
	ctx := t.Context()
	sink := testsvc.NewSMTPSink(t)
	var (
		mu     sync.Mutex
		bodies []map[string]any
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	s := hotpServer(t, authsrv.WithEventScriptDir(dir), authsrv.WithDialPolicy(netguard.MustParse("127.0.0.0/8")))
	if err := s.Notify().SetSMTP(ctx, notify.SMTPServer{Identifier: "mail1", Server: "127.0.0.1", Port: sink.Port,
		Sender: "authsrv@example.org", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	setEvent(t, s, eventing.Definition{Name: "mail", Events: []string{"token_init"}, HandlerModule: "UserNotification",
		Action: "sendmail", Position: eventing.Post, Conditions: map[string]string{"tokentype": "hotp"},
		Options: map[string]string{"emailconfig": "mail1", "To": "tokenowner", "subject": "token {serial}"}})
	setEvent(t, s, eventing.Definition{Name: "lock", Events: []string{"validate_check"}, HandlerModule: "Token",
		Action: "disable", Conditions: map[string]string{"result_value": "False", "failcounter": ">2"}})
	setEvent(t, s, eventing.Definition{Name: "hook", Events: []string{"validate_check"}, HandlerModule: "WebHook",
		Action: "post_webhook", Options: map[string]string{"URL": hook.URL, "content_type": "application/json",
			"replace": "True", "data": `{"serial": "{serial}"}`}})
	setEvent(t, s, eventing.Definition{Name: "count", Events: []string{"validate_check"}, HandlerModule: "Counter",
		Action: "increase_counter", Conditions: map[string]string{"result_value": "True"},
		Options: map[string]string{"counter_name": "ok"}})
	setEvent(t, s, eventing.Definition{Name: "quiet", Events: []string{"validate_check"}, HandlerModule: "ResponseMangler",
		Action: "delete", Options: map[string]string{"JSON pointer": "/detail/message"}})

	// UserNotification through InitToken.
	if _, err := s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "totp", Serial: "T1", User: authsrv.Target{User: "alice", Realm: "realm1"},
		Params: token.Params{"genkey": "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "hotp", Serial: "H2", User: authsrv.Target{User: "alice", Realm: "realm1"},
		Params: token.Params{"genkey": "1"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(sink.Messages()) > 0 })
	if msgs := sink.Messages(); len(msgs) != 1 || !strings.Contains(msgs[0].Data, "token H2") {
		t.Fatalf("mails %+v", msgs)
	}
	if _, err := s.Ops().DeleteTokens(ctx, local, authsrv.TokenSelect{Serials: []string{"T1", "H2"}}); err != nil {
		t.Fatal(err)
	}

	// A success through Check: counted, hooked; the changed answer is
	// the exchange's.
	x := &authsrv.Exchange{}
	res, err := s.Validator().Check(authsrv.WithExchange(ctx, x), validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)})
	if err != nil || !res.Value {
		t.Fatalf("check %v %v", res.Value, err)
	}
	if x.Response == nil || x.Response.Detail["serial"] != "H1" {
		t.Fatalf("exchange response %+v", x.Response)
	}
	if _, ok := x.Response.Detail["message"]; ok {
		t.Errorf("detail.message was not deleted: %v", x.Response.Detail)
	}
	if n, _, _ := s.Events().Counter(ctx, "ok"); n != 1 {
		t.Errorf("counter %d", n)
	}
	// The counter's change and its run's entry commit together: one entry.
	entries := 0
	for _, r := range auditRows(t, s) {
		if fmt.Sprint(r["action"]) == "POST-EVENT validate_check>>Counter:increase_counter" {
			entries++
		}
	}
	if entries != 1 {
		t.Errorf("%d entries of the counter's run", entries)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) > 0 })
	mu.Lock()
	if bodies[0]["serial"] != "H1" {
		t.Errorf("webhook %v", bodies)
	}
	mu.Unlock()

	// Three wrong OTPs disable H1.
	for i := range 3 {
		if res, err := s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: "1234000000"}); err != nil || res.Value {
			t.Fatalf("wrong otp %d: %v %v", i, res.Value, err)
		}
	}
	if tk, err := s.Tokens().Get(ctx, "H1"); err != nil || tk.Active {
		t.Fatalf("H1 after three wrong OTPs: active %v, %v", tk.Active, err)
	}

	// A pre Script with raise_error aborts the operation, which changes
	// nothing.
	if err := os.WriteFile(filepath.Join(dir, "no.sh"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	setEvent(t, s, eventing.Definition{Name: "gate", Events: []string{"token_enable"}, HandlerModule: "Script", Position: eventing.Pre,
		Action: "no.sh", Options: map[string]string{"background": "wait", "raise_error": "True"}})
	if _, err := s.Ops().EnableTokens(ctx, local, authsrv.TokenSelect{Serials: []string{"H1"}}); err == nil {
		t.Fatal("the failing script did not abort the operation")
	}
	if tk, _ := s.Tokens().Get(ctx, "H1"); tk.Active {
		t.Error("the aborted operation enabled the token")
	}
}

// TestEventHandlerFailureKeepsOperation: a failing handler without
// abort_on_error is audited and the operation answers as usual.
func TestEventHandlerFailureKeepsOperation(t *testing.T) {
	ctx := t.Context()
	s := hotpServer(t)
	setEvent(t, s, eventing.Definition{Name: "nomail", Events: []string{"validate_check"}, HandlerModule: "UserNotification",
		Action: "sendmail", Options: map[string]string{"emailconfig": "missing"}})
	res, err := s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)})
	if err != nil || !res.Value {
		t.Fatalf("check %v %v", res.Value, err)
	}
	rows := auditRows(t, s)
	i := slices.IndexFunc(rows, func(r audit.Row) bool {
		return fmt.Sprint(r["action"]) == "POST-EVENT validate_check>>UserNotification:sendmail"
	})
	if i < 0 || fmt.Sprint(rows[i]["success"]) != "0" || !strings.HasPrefix(fmt.Sprint(rows[i]["info"]), "nomail (") {
		t.Fatalf("failure entry: %v", rows)
	}
}

// TestCustomEventModule: a Go program registers its own module.
func TestCustomEventModule(t *testing.T) {
	ctx := t.Context()
	m := &recordingModule{}
	s := hotpServer(t, authsrv.WithEventModule(m))
	setEvent(t, s, eventing.Definition{Name: "mine", Events: []string{"validate_check"}, HandlerModule: "Mine", Action: "note"})
	if _, err := s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)}); err != nil {
		t.Fatal(err)
	}
	if m.seen.Load() == nil || *m.seen.Load() != "validate_check alice H1" {
		t.Errorf("module saw %v", m.seen.Load())
	}
	if !slices.Contains(s.Events().Modules(), "Mine") {
		t.Error("module not listed")
	}
}

type recordingModule struct{ seen atomicString }

type atomicString struct {
	mu sync.Mutex
	v  *string
}

func (a *atomicString) Load() *string  { a.mu.Lock(); defer a.mu.Unlock(); return a.v }
func (a *atomicString) Store(s string) { a.mu.Lock(); defer a.mu.Unlock(); a.v = &s }

func (m *recordingModule) Name() string        { return "Mine" }
func (m *recordingModule) Positions() []string { return []string{eventing.Post} }
func (m *recordingModule) DefaultAbort() bool  { return false }
func (m *recordingModule) Actions(context.Context) (map[string]map[string]eventing.OptionSpec, error) {
	return map[string]map[string]eventing.OptionSpec{"note": {}}, nil
}
func (m *recordingModule) Check(_ context.Context, d eventing.Definition) error {
	if d.Action != "note" {
		return errors.New("unknown action")
	}
	return nil
}
func (m *recordingModule) Do(ctx context.Context, r *eventing.Run) error {
	m.seen.Store(r.Call.Event + " " + r.User(ctx).Login + " " + r.Call.Serial)
	return nil
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTokenHandlerAttachesOffline: a Token handler attaches every new
// HOTP token to the offline application; the next successful check
// hands out offline values.
func TestTokenHandlerAttachesOffline(t *testing.T) {
	ctx := t.Context()
	s := hotpServer(t)
	setEvent(t, s, eventing.Definition{Name: "offline", Events: []string{"token_init"}, HandlerModule: "Token",
		Action: "attach application", Conditions: map[string]string{"tokentype": "hotp"},
		Options: map[string]string{"application": "offline", "count": "10"}})
	if _, err := s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "hotp", Serial: "H2", User: authsrv.Target{User: "bob", Realm: "realm1"},
		Params: token.Params{"otpkey": fmt.Sprintf("%x", hotpKey), "pin": "1234"}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Validator().Check(ctx, validate.Request{User: "bob", Realm: "realm1", Pass: hotpPass(0)})
	if err != nil || !res.Value {
		t.Fatalf("check %v %v", res.Value, err)
	}
	items, _ := res.AuthItems["offline"].([]map[string]any)
	if len(items) != 1 {
		t.Fatalf("auth items %#v", res.AuthItems)
	}
	if resp, _ := items[0]["response"].(map[string]string); len(resp) != 10 {
		t.Errorf("offline values %#v", items[0]["response"])
	}
}
