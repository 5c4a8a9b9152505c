package authsrv

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/store"
)

// Ops is the operation layer: every operation of the HTTP API as a Go
// call, reads included. Each takes the caller and, in this order, checks
// the caller's rights (none for a trusted local caller), runs the pre
// event handlers, makes its change with the audit entry in the same store
// transaction (a read writes its entry afterwards), and then runs the post
// event handlers. A change that exists has its audit entry, whatever
// became of the client that asked for it.
//
// The subsystem accessors (Policies, Realms, Tokens, ...) stay available
// to tools that manage the store directly; what they do bypasses the
// rights, the audit and the event handlers.
type Ops struct {
	s   *Server
	seq atomic.Int64
}

// Ops returns the operation layer.
func (s *Server) Ops() *Ops { return s.ops }

// Event is what an EventHandler sees of one operation: its name (the
// privacyIDEA event name, e.g. "set_policy" or "token_init"), the caller,
// and after the operation its audit entry and error.
type Event struct {
	Name   string
	Caller caller.Caller
	Entry  audit.Entry
	Err    error
}

// EventHandler runs around every operation: those of Ops and the
// validator's (validate_check, validate_triggerchallenge,
// validate_poll_transaction). Pre runs after the rights check and before
// the change; an error from Pre aborts the operation
// (it is audited as a failure). Post runs after the change committed (or
// failed); it cannot undo it.
type EventHandler interface {
	Pre(ctx context.Context, ev Event) error
	Post(ctx context.Context, ev Event)
}

// opSpec describes one operation for run.
type opSpec struct {
	// event is the operation's event name.
	event string
	// action is the audit's action column when the caller gives none
	// ("POST /policy/p1").
	action string
	// right is the admin or user right the caller needs ("" for none).
	right string
	// target is what the right is checked against.
	target Target
	// check, when set, is a rights check of the operation's own (one that
	// depends on its input, as the custom-attribute rights do); it runs
	// after right and before the pre event handlers.
	check func(ctx context.Context, r *opRun) error
}

// opRun is one operation in flight: the audit entry it fills in and the
// policies that decided.
type opRun struct {
	o       *Ops
	who     caller.Caller
	started time.Time
	// Entry is completed by the operation (serial, token type, user,
	// info, ...); run fills in the caller's columns.
	Entry    audit.Entry
	policies []string
	// written is set by Audit when the entry went into the change's
	// transaction.
	written bool
	// reply is the operation's answer in its JSON form for the post event
	// handlers (respond); nil: status true, value true.
	reply *eventing.Response
}

// respond records the operation's answer as its JSON envelope carries it,
// for the post event handlers' conditions and changes.
func (r *opRun) respond(value any, detail map[string]any) {
	r.reply = &eventing.Response{Status: true, Value: value, Detail: detail}
}

// note adds the names of policies that decided.
func (r *opRun) note(names ...string) { r.policies = append(r.policies, names...) }

// entry is the audit entry as it stands, with success.
func (r *opRun) entry(success bool, err error) audit.Entry {
	e := r.Entry
	s := r.o.s
	end := s.cfg.now()
	e.StartDate, e.Date = r.started.UTC(), end.UTC()
	e.Duration = end.Sub(r.started).Seconds()
	e.Node = s.cfg.nodeName
	e.ThreadID = strconv.FormatInt(r.o.seq.Add(1), 10)
	if r.who.Client.IsValid() {
		e.Client = r.who.Client.String()
	}
	name, version := audit.SplitAgent(r.who.UserAgent)
	e.UserAgent, e.UserAgentVersion = audit.Text(name, 64), audit.Text(version, 64)
	switch r.who.Role {
	case caller.Admin:
		e.Administrator = r.who.Name
	case caller.User:
		if e.User == "" {
			e.User, e.Realm = r.who.Name, r.who.Realm
			if e.Resolver == "" {
				e.Resolver = r.who.Resolver
			}
		}
	}
	if len(r.policies) > 0 {
		ps := slices.Clone(r.policies)
		slices.Sort(ps)
		e.Policies = strings.Join(slices.Compact(ps), ",")
	}
	e.Success = success
	if err != nil {
		if _, _, msg, _, internal := apierr.Wire(err); !internal && e.Info == "" {
			e.Info = audit.Text(msg, 512)
		}
	}
	return e
}

// Audit writes the operation's entry (a success) in tx: the store hook
// that every operation hands to the write that makes its change. It may
// run more than once (a retried transaction); only the committed run
// counts.
func (r *opRun) Audit(tx store.Tx) error {
	r.written = false
	if _, err := r.o.s.audit.WriteTx(tx, r.entry(true, nil)); err != nil {
		return err
	}
	r.written = true
	return nil
}

// run executes one operation. fn makes the change and hands r.Audit to the
// store write that commits it; when fn returns without having written the
// entry in its transaction (an error, or nothing to change), run writes it
// afterwards, with a context the client's departure does not cancel.
func (o *Ops) run(ctx context.Context, who caller.Caller, spec opSpec, fn func(ctx context.Context, r *opRun) error) error {
	r := &opRun{o: o, who: who, started: o.s.cfg.now()}
	r.Entry.Action = who.Action
	if r.Entry.Action == "" {
		r.Entry.Action = spec.action
	}
	r.Entry.Action = audit.Text(r.Entry.Action, 256)
	r.Entry.User, r.Entry.Realm, r.Entry.Resolver = spec.target.User, spec.target.Realm, spec.target.Resolver
	err := o.pre(ctx, r, spec)
	if err == nil {
		err = fn(ctx, r)
	}
	if err != nil {
		r.written = false
	}
	if !r.written {
		if _, werr := o.s.audit.Write(context.WithoutCancel(ctx), r.entry(err == nil, err)); werr != nil && err == nil {
			err = o.unaudited(who, spec, werr)
		}
	}
	if perr := o.post(ctx, r, spec, err); perr != nil {
		return perr
	}
	return err
}

// unaudited decides a successful operation whose audit entry (written
// after it, see run) could not be written. A read (the API's GET
// operations) changed nothing, so it still answers: on a full disk reads
// keep working; audit.Log.Unwritten counts it, and the store's failure is
// logged once, when it begins. Any other operation answers the write's
// error (a store write failure maps to apierr.StoreWrite): no change is
// answered as done without its entry.
func (o *Ops) unaudited(who caller.Caller, spec opSpec, werr error) error {
	lg := o.s.cfg.log.Error()
	if errors.Is(werr, store.ErrWriteFailed) {
		lg = o.s.cfg.log.Debug()
	}
	lg = lg.Err(werr).Str("component", "audit").Str("request_id", who.RequestID).Str("action", spec.action)
	if strings.HasPrefix(spec.action, "GET ") {
		lg.Msg("read answered without its audit entry")
		return nil
	}
	lg.Msg("audit write failed")
	if errors.Is(werr, store.ErrWriteFailed) {
		return werr
	}
	return apierr.New(apierr.Server, "Internal server error.")
}

// pre checks the caller's right and runs the pre event handlers.
func (o *Ops) pre(ctx context.Context, r *opRun, spec opSpec) error {
	if spec.right != "" {
		names, err := o.Authorize(ctx, r.who, spec.right, spec.target)
		r.note(names...)
		if err != nil {
			return err
		}
	}
	if spec.check != nil {
		if err := spec.check(ctx, r); err != nil {
			return err
		}
	}
	for _, h := range o.s.cfg.eventHandlers {
		if err := h.Pre(ctx, Event{Name: spec.event, Caller: r.who, Entry: r.Entry}); err != nil {
			return err
		}
	}
	if !o.s.events.Wants(ctx, spec.event) {
		return nil
	}
	method, path, _ := strings.Cut(spec.action, " ")
	return o.s.events.Run(ctx, eventing.Pre, o.s.newCall(ctx, spec.event, method, path, r.who, r.Entry))
}

// post runs the post event handlers. An error is that of a handler that
// aborts the request: the caller gets it instead of the answer (the
// change stays, with its audit entry).
func (o *Ops) post(ctx context.Context, r *opRun, spec opSpec, err error) error {
	var e audit.Entry
	if len(o.s.cfg.eventHandlers) > 0 || o.s.events.Wants(ctx, spec.event) {
		e = r.entry(err == nil, err)
	}
	ctx = context.WithoutCancel(ctx)
	for _, h := range o.s.cfg.eventHandlers {
		h.Post(ctx, Event{Name: spec.event, Caller: r.who, Entry: e, Err: err})
	}
	if !o.s.events.Wants(ctx, spec.event) {
		return nil
	}
	method, path, _ := strings.Cut(spec.action, " ")
	c := o.s.newCall(ctx, spec.event, method, path, r.who, e)
	c.Err = err
	switch {
	case err != nil:
		c.Response = failure(err)
	case r.reply != nil:
		c.Response = r.reply
	default:
		c.Response = &eventing.Response{Status: true, Value: true}
	}
	perr := o.s.events.Run(ctx, eventing.Post, c)
	eventsAnswered(ctx, c.Response)
	return perr
}
