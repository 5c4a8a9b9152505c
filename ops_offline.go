package authsrv

import (
	"context"
	"errors"
	"net/http"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// Offline OTP: the offline application hands out hashed HOTP values
// after a successful /validate/check (the validator's AuthItems hook) and
// on a refill.
const (
	// eventOfflineRefill is the refill's event name.
	eventOfflineRefill = "validate_offlinerefill"
	// actionHideRefillError is the token-scope policy action that turns
	// every refused refill into one generic error.
	actionHideRefillError = "hide_specific_error_message_for_offline_refill"
)

// errRefillHidden is every refused refill under
// hide_specific_error_message_for_offline_refill.
var errRefillHidden = apierr.New(apierr.Validate, "Failed offline token refill")

// offlineRefiller is what the registered offline application must do
// for a refill (machine.Offline does).
type offlineRefiller interface {
	Refill(ctx context.Context, req machine.RefillRequest, also ...func(store.Tx) error) (machine.OfflineItem, error)
}

var _ offlineRefiller = (*machine.Offline)(nil)

// newOffline builds the offline application the root registers.
func (s *Server) newOffline() *machine.Offline {
	c := s.cfg
	return machine.NewOffline(machine.OfflineConfig{Tokens: s.tokens, Rand: c.rand, Now: c.now})
}

// offlineBinding returns the first binding of serial to the offline
// application (ok false when there is none) and the registered offline
// application.
func (s *Server) offlineBinding(ctx context.Context, serial string) (machine.Binding, machine.App, bool, error) {
	if s.machineTokens == nil || !token.ValidSerial(serial) {
		return machine.Binding{}, nil, false, nil
	}
	app, ok := s.machineTokens.Apps().Get(machine.OfflineName)
	if !ok {
		return machine.Binding{}, nil, false, nil
	}
	if has, err := s.machineTokens.HasBindings(ctx, machine.OfflineName); err != nil || !has {
		return machine.Binding{}, app, false, err
	}
	list, err := s.machineTokens.List(ctx, machine.Query{Serial: serial, Application: machine.OfflineName})
	if err != nil || len(list.Tokens) == 0 {
		return machine.Binding{}, app, false, err
	}
	return list.Tokens[0].Binding, app, true, nil
}

// offlineAuthItems is the validator's AuthItems hook (privacyIDEA's
// offline_info): for a token attached to the offline application, the
// items of its first offline binding, {"offline": [item]}, each with the
// binding's options and the serial. The PIN hashed into the values is the
// PIN part of pass. A token attached several times still hands out one
// set of values (several would share the counter and the refill token).
func (s *Server) offlineAuthItems(ctx context.Context, who caller.Caller, serial, pass string) (map[string]any, error) {
	b, app, ok, err := s.offlineBinding(ctx, serial)
	if err != nil || !ok {
		return nil, err
	}
	t, err := s.tokens.Get(ctx, serial)
	if err != nil {
		return nil, err
	}
	item, ok, err := app.AuthItem(ctx, b, t, machine.AuthItemRequest{Application: machine.OfflineName, Serial: serial,
		Challenge: pass, UserAgent: who.UserAgent})
	if err != nil || !ok {
		return nil, err
	}
	if item == nil {
		item = map[string]any{}
	}
	for k, v := range b.Options {
		if _, set := item[k]; !set {
			item[k] = v
		}
	}
	item["serial"] = serial
	return map[string]any{machine.OfflineName: []map[string]any{item}}, nil
}

// OfflineRefillRequest is one offline refill (POST
// /validate/offlinerefill): the token, the refill token the client got
// last, and the last PIN and OTP value its user entered offline.
type OfflineRefillRequest struct {
	Serial      string
	RefillToken string
	Pass        string
}

// OfflineRefill answers an offline refill (no right: the client holds the
// refill token; event validate_offlinerefill): the values the client used
// are replaced by new ones and the refill token is rotated, in one store
// write with the audit entry. It refuses, changing nothing, an unknown or
// unusable token, a token not attached to the offline application, a
// wrong or used refill token, and a password that is not the PIN with one
// of the values handed out last (see machine.Offline.Refill for the
// texts). Under the token-scope policy
// hide_specific_error_message_for_offline_refill every such refusal is
// "Failed offline token refill".
func (o *Ops) OfflineRefill(ctx context.Context, who caller.Caller, req OfflineRefillRequest) (machine.OfflineItem, error) {
	var out machine.OfflineItem
	err := o.run(ctx, who, opSpec{event: eventOfflineRefill, action: "POST /validate/offlinerefill"},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Serial = audit.Text(req.Serial, 64)
			switch {
			case req.Serial == "":
				return apierr.MissingParameter("serial")
			case req.RefillToken == "":
				return apierr.MissingParameter("refilltoken")
			}
			b, app, attached, err := o.s.offlineBinding(ctx, req.Serial)
			if err != nil {
				return err
			}
			refiller, ok := app.(offlineRefiller)
			if !ok {
				attached = false
				refiller = o.s.newOffline()
			}
			opts := machine.OfflineOptions{Count: machine.OfflineDefaultCount, Rounds: machine.OfflineDefaultRounds}
			if attached {
				if opts, err = machine.ParseOfflineOptions(b.Options); err != nil {
					return err
				}
			}
			out, err = refiller.Refill(ctx, machine.RefillRequest{Serial: req.Serial, RefillToken: req.RefillToken, Pass: req.Pass,
				Attached: attached, Options: opts}, r.Audit)
			if err == nil {
				r.Entry.TokenType = "hotp"
				r.respond(true, nil)
			}
			return err
		})
	if err != nil {
		return machine.OfflineItem{}, o.hideRefillError(ctx, who, req.Serial, err)
	}
	return out, nil
}

// hideRefillError replaces a refusal (an error of status 400) by
// errRefillHidden when a token-scope policy
// hide_specific_error_message_for_offline_refill matches the token's
// owner and the client.
func (o *Ops) hideRefillError(ctx context.Context, who caller.Caller, serial string, err error) error {
	e, ok := errors.AsType[*apierr.Error](err)
	if !ok || e.Status() != http.StatusBadRequest {
		return err
	}
	q := policy.Query{Scope: policy.ScopeToken, Action: actionHideRefillError, Client: who.Client, UserAgent: who.UserAgent,
		Data: func() policy.ConditionData { return o.conditionData(ctx, who, Target{}) }}
	if token.ValidSerial(serial) {
		if t, gerr := o.s.tokens.Get(ctx, serial); gerr == nil && t.Assigned() {
			q.User, q.Realm, q.Resolver = policy.Str(t.Owner.Login), policy.Str(t.Owner.Realm), policy.Str(t.Owner.Resolver)
		}
	}
	ps, perr := o.s.policies.Match(ctx, q)
	if perr != nil || len(ps) == 0 {
		return err
	}
	return errRefillHidden
}
