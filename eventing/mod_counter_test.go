package eventing

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/apierr"
)

func TestCounterModuleDescription(t *testing.T) {
	e := newTokEnv(t)
	m := newCounter(e.svc)
	if m.Name() != "Counter" || m.DefaultAbort() || !slices.Equal(m.Positions(), []string{"post", "pre"}) {
		t.Fatalf("Name %q DefaultAbort %v Positions %v", m.Name(), m.DefaultAbort(), m.Positions())
	}
	acts, err := m.Actions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"increase_counter", "decrease_counter", "reset_counter"} {
		if o := acts[a]["counter_name"]; !o.Required || o.Type != "str" {
			t.Errorf("%s counter_name = %+v", a, o)
		}
	}
	if o := acts["decrease_counter"]["allow_negative_values"]; o.Type != "bool" {
		t.Errorf("allow_negative_values = %+v", o)
	}
	if len(acts) != 3 {
		t.Errorf("actions %v", acts)
	}
	err = m.Check(t.Context(), Definition{Action: "increase_counter", Options: map[string]string{"counter_name": "  "}})
	if err == nil || !apierr.Is(err, apierr.Parameter) || !strings.Contains(err.Error(), "counter_name") {
		t.Fatalf("Check without a counter name: %v", err)
	}
}

func TestCounterModule(t *testing.T) {
	e := newTokEnv(t)
	ctx := t.Context()
	c := tokAdminCall("validate_check", "")
	value := func(name string) int64 {
		t.Helper()
		n, _, err := e.svc.Counter(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := []struct {
		action string
		opts   map[string]string
		name   string
		want   int64
	}{
		{"increase_counter", map[string]string{"counter_name": "fails"}, "fails", 1},
		{"increase_counter", map[string]string{"counter_name": "fails"}, "fails", 2},
		{"decrease_counter", map[string]string{"counter_name": "fails"}, "fails", 1},
		{"decrease_counter", map[string]string{"counter_name": "fails"}, "fails", 0},
		// Floors at 0 unless negative values are allowed.
		{"decrease_counter", map[string]string{"counter_name": "fails"}, "fails", 0},
		{"decrease_counter", map[string]string{"counter_name": "fails", "allow_negative_values": "True"}, "fails", -1},
		{"decrease_counter", map[string]string{"counter_name": "fails", "allow_negative_values": "1"}, "fails", -2},
		// An increase counts up from a negative value.
		{"increase_counter", map[string]string{"counter_name": "fails"}, "fails", -1},
		{"reset_counter", map[string]string{"counter_name": "fails"}, "fails", 0},
		// A new counter starts at 0 (a decrease creates it at 0).
		{"decrease_counter", map[string]string{"counter_name": "other"}, "other", 0},
		{"increase_counter", map[string]string{"counter_name": "other"}, "other", 1},
	}
	for i, s := range steps {
		e.mustDo(t, "Counter", s.action, s.opts, c)
		if got := value(s.name); got != s.want {
			t.Fatalf("step %d %s %v: %s = %d, want %d", i, s.action, s.opts, s.name, got, s.want)
		}
	}
	all, err := e.svc.Counters(ctx)
	if err != nil || len(all) != 2 || all["fails"] != 0 || all["other"] != 1 {
		t.Fatalf("Counters = %v %v", all, err)
	}
	if err := e.do(t, "Counter", "double_counter", map[string]string{"counter_name": "fails"}, c); !apierr.Is(err, apierr.Parameter) {
		t.Fatalf("unknown action: %v", err)
	}
}

// TestCounterModuleConcurrent counts events that run at the same time:
// no increase is lost.
func TestCounterModuleConcurrent(t *testing.T) {
	e := newTokEnv(t)
	const n = 40
	m := newCounter(e.svc)
	d := Definition{Name: "count", HandlerModule: "Counter", Action: "increase_counter", Options: map[string]string{"counter_name": "hits"}}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- m.Do(t.Context(), &Run{Def: d, Call: tokAdminCall("validate_check", ""), Position: Post, svc: e.svc, facts: &facts{}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, _, _ := e.svc.Counter(t.Context(), "hits"); got != n {
		t.Fatalf("hits = %d, want %d", got, n)
	}
}
