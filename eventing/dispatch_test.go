package eventing

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// stepModule records the definitions it runs and fails or panics on
// demand (action "ok", "fail", "abort", "panic").
type stepModule struct {
	mu  sync.Mutex
	ran []string
}

func (m *stepModule) Name() string        { return "Step" }
func (m *stepModule) Positions() []string { return []string{Post, Pre} }
func (m *stepModule) DefaultAbort() bool  { return false }
func (m *stepModule) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{"ok": {}, "fail": {}, "abort": {}, "panic": {}}, nil
}
func (m *stepModule) Check(context.Context, Definition) error { return nil }
func (m *stepModule) Do(_ context.Context, r *Run) error {
	m.mu.Lock()
	m.ran = append(m.ran, r.Def.Name)
	m.mu.Unlock()
	switch r.Def.Action {
	case "fail":
		return errors.New("it failed")
	case "abort":
		return &Abort{Err: errors.New("stop here")}
	case "panic":
		panic("boom")
	}
	return nil
}

func (m *stepModule) names() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := strings.Join(m.ran, ",")
	m.ran = nil
	return s
}

type dispatchEnv struct {
	svc *Service
	st  store.Store
	log *audit.Log
	mod *stepModule
	buf *syncLog
}

func newDispatchEnv(t *testing.T) *dispatchEnv {
	t.Helper()
	st := storetest.Open(t)
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.New(audit.Config{Store: st, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncLog{}
	s := New(Config{Store: st, Audit: lg, Log: zerolog.New(buf)})
	t.Cleanup(s.Close)
	m := &stepModule{}
	s.Register(m)
	return &dispatchEnv{svc: s, st: st, log: lg, mod: m, buf: buf}
}

func (e *dispatchEnv) def(t *testing.T, name, action, position string, ordering int, abort bool, events ...string) int {
	t.Helper()
	id, err := e.svc.Set(t.Context(), Definition{Name: name, Active: true, Ordering: ordering, Position: position,
		AbortOnError: abort, HandlerModule: "Step", Action: action, Events: events}, true)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *dispatchEnv) entries(t *testing.T) []audit.Row {
	t.Helper()
	var rows []audit.Row
	if err := e.log.Each(t.Context(), audit.Query{Ascending: true}, func(r audit.Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestRunOrder: definitions run by ordering, then by id; only active ones
// of the event and position.
func TestRunOrder(t *testing.T) {
	e := newDispatchEnv(t)
	ctx := t.Context()
	e.def(t, "c", "ok", Post, 2, false, "validate_check")
	e.def(t, "a", "ok", Post, 1, false, "token_init, validate_check")
	e.def(t, "b", "ok", Post, 1, false, "validate_check")
	e.def(t, "pre", "ok", Pre, 0, false, "validate_check")
	off := e.def(t, "off", "ok", Post, 0, false, "validate_check")
	if err := e.svc.SetActive(ctx, off, false); err != nil {
		t.Fatal(err)
	}
	e.def(t, "other", "ok", Post, 0, false, "token_init")
	if err := e.svc.Run(ctx, Post, &Call{Event: "validate_check"}); err != nil {
		t.Fatal(err)
	}
	if got := e.mod.names(); got != "a,b,c" {
		t.Errorf("post ran %q", got)
	}
	if err := e.svc.Run(ctx, Pre, &Call{Event: "validate_check"}); err != nil || e.mod.names() != "pre" {
		t.Errorf("pre: %v", err)
	}
	if !e.svc.Wants(ctx, "token_init") || e.svc.Wants(ctx, "token_delete") {
		t.Error("Wants")
	}
	ds, _ := e.svc.List(ctx, 0)
	if len(ds) != 6 || strings.Join(ds[1].Events, "|") != "token_init|validate_check" {
		t.Errorf("stored %+v", ds)
	}
	// Each run has its own entry.
	n := 0
	for _, r := range e.entries(t) {
		if r["action"] == "POST-EVENT validate_check>>Step:ok" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d handler entries, want 3", n)
	}
}

// TestRunFailures: a failure is audited and the rest runs; abort_on_error
// or an Abort stops; a panic is a failure.
func TestRunFailures(t *testing.T) {
	e := newDispatchEnv(t)
	ctx := t.Context()
	e.def(t, "f", "fail", Post, 1, false, "ev")
	e.def(t, "p", "panic", Post, 2, false, "ev")
	e.def(t, "ok", "ok", Post, 3, false, "ev")
	if err := e.svc.Run(ctx, Post, &Call{Event: "ev"}); err != nil {
		t.Fatalf("failures without abort_on_error: %v", err)
	}
	if got := e.mod.names(); got != "f,p,ok" {
		t.Errorf("ran %q", got)
	}
	var infos []string
	for _, r := range e.entries(t) {
		if r["success"] == false || r["success"] == 0 || r["success"] == json.Number("0") || r["success"] == "0" {
			infos = append(infos, r["info"].(string))
		}
	}
	if strings.Join(infos, "|") != "f (Error)|p (Error)" {
		t.Errorf("failure entries %q", infos)
	}
	if strings.Contains(e.buf.String(), "panicked") == false {
		t.Error("the panic was not logged")
	}

	e2 := newDispatchEnv(t)
	e2.def(t, "first", "fail", Pre, 1, true, "ev")
	e2.def(t, "second", "ok", Pre, 2, false, "ev")
	if err := e2.svc.Run(ctx, Pre, &Call{Event: "ev"}); err == nil || err.Error() != "it failed" {
		t.Fatalf("abort_on_error: %v", err)
	}
	if got := e2.mod.names(); got != "first" {
		t.Errorf("ran %q after an abort", got)
	}

	e3 := newDispatchEnv(t)
	e3.def(t, "gate", "abort", Pre, 1, false, "ev")
	e3.def(t, "after", "ok", Pre, 2, false, "ev")
	var ab *Abort
	if err := e3.svc.Run(ctx, Pre, &Call{Event: "ev"}); !errors.As(err, &ab) {
		t.Fatalf("Abort: %v", err)
	}
	if got := e3.mod.names(); got != "gate" {
		t.Errorf("ran %q after an Abort", got)
	}
}

// TestDefinitionsFromAnotherWriter: a change that did not go through the
// Service (another node's) is seen once the revision is checked again.
func TestDefinitionsFromAnotherWriter(t *testing.T) {
	e := newDispatchEnv(t)
	ctx := t.Context()
	e.def(t, "a", "ok", Post, 1, false, "ev")
	if !e.svc.Wants(ctx, "ev") {
		t.Fatal("not wanted")
	}
	other := New(Config{Store: e.st})
	other.Register(&stepModule{})
	ds, _ := other.List(ctx, 0)
	if err := other.Delete(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	// Within the recheck bound the old set may still be used; past it,
	// not.
	e.svc.snap.SetRecheck(time.Nanosecond)
	time.Sleep(time.Millisecond)
	if e.svc.Wants(ctx, "ev") {
		t.Error("a definition deleted by another writer still runs")
	}
}

// TestBackgroundQueueFull: work beyond the queue is dropped and logged
// once, with the count.
func TestBackgroundQueueFull(t *testing.T) {
	e := newDispatchEnv(t)
	release := make(chan struct{})
	var mu sync.Mutex
	executed := 0
	total := backgroundWorkers + backgroundQueue + 50
	for range total {
		e.svc.Background("block", func(context.Context) {
			<-release
			mu.Lock()
			executed++
			mu.Unlock()
		})
	}
	close(release)
	if err := e.svc.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	dropped := int(e.svc.hooks.dropped.Load())
	if dropped < 50 {
		t.Fatalf("%d dropped, want at least 50", dropped)
	}
	deadline := 0
	for {
		mu.Lock()
		n := executed
		mu.Unlock()
		if n == total-dropped || deadline > 2000 {
			break
		}
		deadline++
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	if executed != total-dropped {
		t.Errorf("%d ran, %d dropped, of %d", executed, dropped, total)
	}
	mu.Unlock()
	if n := strings.Count(e.buf.String(), "background event queue is full"); n != 1 {
		t.Fatalf("%d log lines for the drops", n)
	}
	if !strings.Contains(e.buf.String(), `"dropped":1`) {
		t.Errorf("log %s", e.buf.String())
	}
}
