package validate

import (
	"context"

	"github.com/authsrv/authsrv/audit"
)

// Event names of the validator's operations, as privacyIDEA names them.
const (
	EventCheck   = "validate_check"
	EventTrigger = "validate_triggerchallenge"
	EventPoll    = "validate_poll_transaction"
)

// EventHook runs around each operation of the validator; the root wires
// the server's event handlers here, so that they run for a Go program's
// Check as for an HTTP client's.
type EventHook interface {
	// Pre runs before the decision and may change the request (a request
	// mangler sets its realm, say). An error from it is the operation's
	// answer (audited as a failure).
	Pre(ctx context.Context, name string, r *Request, e audit.Entry) error
	// Post runs after the audit entry was written, with that entry and
	// the answer. An error from it (a handler that aborts the request)
	// replaces the answer; the decision and its entry stay as they are.
	Post(ctx context.Context, name string, r Request, e audit.Entry, res Response, err error) error
}

// pre runs the pre event handlers of a's operation; they may change *r.
func (v *Validator) pre(ctx context.Context, a *auditor, r *Request) error {
	if v.cfg.Events == nil {
		return nil
	}
	err := v.cfg.Events.Pre(ctx, a.event, r, audit.Entry{Action: a.action, User: r.User, Realm: r.Realm,
		Resolver: r.Resolver, Serial: r.Serial, TokenType: r.Type})
	a.r = *r
	return err
}

// post runs the post event handlers of a's operation.
func (v *Validator) post(ctx context.Context, a *auditor, res Response, err error) error {
	if v.cfg.Events == nil {
		return nil
	}
	var e audit.Entry
	if a.last != nil {
		e = *a.last
	}
	return v.cfg.Events.Post(context.WithoutCancel(ctx), a.event, a.r, e, res, err)
}
