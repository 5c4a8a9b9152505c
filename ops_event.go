package authsrv

import (
	"context"
	"strconv"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/eventing"
)

// The rights of the event handler definitions.
const (
	rightEventRead  = "eventhandling_read"
	rightEventWrite = "eventhandling_write"
)

// EventDefinitions lists the event handler definitions (id > 0: only that
// one, an empty list when it does not exist) (right eventhandling_read).
func (o *Ops) EventDefinitions(ctx context.Context, who caller.Caller, id int) ([]eventing.Definition, error) {
	action := "GET /event/"
	if id > 0 {
		action += strconv.Itoa(id)
	}
	var out []eventing.Definition
	err := o.readConfig(ctx, who, "get_event", action, rightEventRead, Target{}, func(ctx context.Context, r *opRun) error {
		var err error
		out, err = o.s.events.List(ctx, id)
		return err
	})
	return out, err
}

// EventInfo reads what the definitions are made of: what is "available"
// (the event names), "handlermodules", or, for module, its "positions",
// "defaults", "actions" and "conditions" (right eventhandling_read).
func (o *Ops) EventInfo(ctx context.Context, who caller.Caller, what, module string) (any, error) {
	action := "GET /event/" + what
	if module != "" {
		action += "/" + module
	}
	var out any
	err := o.readConfig(ctx, who, "get_event_"+what, action, rightEventRead, Target{}, func(ctx context.Context, r *opRun) error {
		ev := o.s.events
		m, ok := ev.Module(module)
		switch what {
		case "available":
			out = ev.Available()
		case "handlermodules":
			out = ev.Modules()
		case "positions":
			out = []string{}
			if ok {
				out = m.Positions()
			}
		case "defaults":
			out = map[string]any{"abort_on_error": ok && m.DefaultAbort()}
		case "actions":
			out = map[string]map[string]eventing.OptionSpec{}
			if ok {
				acts, err := m.Actions(ctx)
				if err != nil {
					return err
				}
				out = acts
			}
		case "conditions":
			out = map[string]eventing.ConditionSpec{}
			if ok {
				out = ev.ConditionSpecs(ctx)
			}
		default:
			return eventing.ErrNotFound
		}
		return nil
	})
	return out, err
}

// eventWrite runs a change of the definitions: administrators only, right
// eventhandling_write.
func (o *Ops) eventWrite(ctx context.Context, who caller.Caller, event, action string, fn func(ctx context.Context, r *opRun) error) error {
	return o.run(ctx, who, opSpec{event: event, action: action, right: adminRight(who, rightEventWrite)},
		func(ctx context.Context, r *opRun) error {
			if !who.IsAdmin() {
				return errAdminOnly
			}
			return fn(ctx, r)
		})
}

// SetEventDefinition creates (d.ID 0) or replaces the definition d and
// returns its id (right eventhandling_write). abortSet tells whether
// d.AbortOnError was given; when not, the module's default applies.
func (o *Ops) SetEventDefinition(ctx context.Context, who caller.Caller, d eventing.Definition, abortSet bool) (int, error) {
	var id int
	err := o.eventWrite(ctx, who, "set_event", "POST /event", func(ctx context.Context, r *opRun) error {
		r.Entry.Info = d.Name
		var err error
		id, err = o.s.events.Set(ctx, d, abortSet, r.Audit)
		return err
	})
	return id, err
}

// EnableEventDefinition and DisableEventDefinition switch definition id
// on or off (right eventhandling_write).
func (o *Ops) EnableEventDefinition(ctx context.Context, who caller.Caller, id int) error {
	return o.setEventActive(ctx, who, id, true)
}

// DisableEventDefinition switches definition id off.
func (o *Ops) DisableEventDefinition(ctx context.Context, who caller.Caller, id int) error {
	return o.setEventActive(ctx, who, id, false)
}

func (o *Ops) setEventActive(ctx context.Context, who caller.Caller, id int, active bool) error {
	verb := "disable"
	if active {
		verb = "enable"
	}
	return o.eventWrite(ctx, who, verb+"_event", "POST /event/"+verb+"/"+strconv.Itoa(id), func(ctx context.Context, r *opRun) error {
		return o.s.events.SetActive(ctx, id, active, r.Audit)
	})
}

// DeleteEventDefinition removes definition id (right eventhandling_write).
func (o *Ops) DeleteEventDefinition(ctx context.Context, who caller.Caller, id int) error {
	return o.eventWrite(ctx, who, "delete_event", "DELETE /event/"+strconv.Itoa(id), func(ctx context.Context, r *opRun) error {
		return o.s.events.Delete(ctx, id, r.Audit)
	})
}

// EventCounters returns the counters of the Counter handler module
// (right statistics_read).
func (o *Ops) EventCounters(ctx context.Context, who caller.Caller) (map[string]int64, error) {
	var out map[string]int64
	err := o.readConfig(ctx, who, "get_counters", "GET /monitoring/", "statistics_read", Target{}, func(ctx context.Context, r *opRun) error {
		var err error
		out, err = o.s.events.Counters(ctx)
		return err
	})
	return out, err
}
