package validate

import (
	"context"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
)

// Event names of the validator's operations, as privacyIDEA names them.
const (
	EventCheck   = "validate_check"
	EventTrigger = "validate_triggerchallenge"
	EventPoll    = "validate_poll_transaction"
)

// EventHook runs around each operation of the validator; the root wires
// the server's event handlers here, so that they run for a Go program's
// Check as for an HTTP client's. Pre runs before the decision: an error
// from it is the operation's answer (audited as a failure). Post runs
// after the audit entry was written, with that entry.
type EventHook interface {
	Pre(ctx context.Context, name string, who caller.Caller, e audit.Entry) error
	Post(ctx context.Context, name string, who caller.Caller, e audit.Entry, err error)
}

// pre runs the pre event handlers of a's operation.
func (v *Validator) pre(ctx context.Context, a *auditor) error {
	if v.cfg.Events == nil {
		return nil
	}
	r := a.r
	return v.cfg.Events.Pre(ctx, a.event, r.Caller, audit.Entry{Action: a.action, User: r.User, Realm: r.Realm,
		Resolver: r.Resolver, Serial: r.Serial, TokenType: r.Type})
}

// post runs the post event handlers of a's operation.
func (v *Validator) post(ctx context.Context, a *auditor, err error) {
	if v.cfg.Events == nil {
		return
	}
	var e audit.Entry
	if a.last != nil {
		e = *a.last
	}
	v.cfg.Events.Post(context.WithoutCancel(ctx), a.event, a.r.Caller, e, err)
}
