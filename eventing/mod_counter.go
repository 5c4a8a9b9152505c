package eventing

import (
	"context"
	"fmt"
	"strings"
)

// Actions of the Counter module.
const (
	cntActIncrease = "increase_counter"
	cntActDecrease = "decrease_counter"
	cntActReset    = "reset_counter"
)

// counterModule is the Counter handler module: it counts events in named
// counters that the counter condition and monitoring read.
type counterModule struct{ s *Service }

var _ Module = (*counterModule)(nil)

func newCounter(s *Service) Module { return &counterModule{s: s} }

func (m *counterModule) Name() string        { return "Counter" }
func (m *counterModule) Positions() []string { return []string{Post, Pre} }
func (m *counterModule) DefaultAbort() bool  { return false }

func (m *counterModule) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	name := OptionSpec{Type: "str", Required: true, Description: "The name of the counter."}
	return map[string]map[string]OptionSpec{
		cntActIncrease: {"counter_name": name},
		cntActDecrease: {
			"counter_name":          name,
			"allow_negative_values": {Type: "bool", Description: "Let the counter go below 0 (otherwise it stops at 0)."},
		},
		cntActReset: {"counter_name": name},
	}, nil
}

// Check requires a counter name for the known actions; an unknown action
// is stored (privacyIDEA does not validate action names) and fails when
// it runs.
func (m *counterModule) Check(_ context.Context, d Definition) error {
	switch strings.TrimSpace(d.Action) {
	case cntActIncrease, cntActDecrease, cntActReset:
		if strings.TrimSpace(d.Options["counter_name"]) == "" {
			return paramErr(fmt.Sprintf("The action %q needs the option %q.", d.Action, "counter_name"))
		}
	}
	return nil
}

// Do changes the counter in one store transaction.
func (m *counterModule) Do(ctx context.Context, r *Run) error {
	name := r.Def.Options["counter_name"]
	var (
		n   int64
		err error
	)
	switch act := strings.TrimSpace(r.Def.Action); act {
	case cntActIncrease:
		// An increase never floors: a counter a decrease with negative
		// values took below 0 goes up by one.
		n, err = m.s.counters.add(ctx, name, 1, true, false, r.InTx(ctx))
	case cntActDecrease:
		n, err = m.s.counters.add(ctx, name, -1, IsTrue(r.Def.Options["allow_negative_values"]), false, r.InTx(ctx))
	case cntActReset:
		n, err = m.s.counters.add(ctx, name, 0, false, true, r.InTx(ctx))
	default:
		return paramErr("Unknown action " + r.Def.Action + " of the handler module Counter.")
	}
	if err != nil {
		return err
	}
	m.s.cfg.Log.Debug().Str("component", "eventing").Str("handler", r.Def.Name).Str("action", r.Def.Action).
		Str("counter", strings.TrimSpace(name)).Int64("value", n).Msg("event counter changed")
	return nil
}
