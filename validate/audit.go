package validate

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/store"
)

// Default audit actions of the operations, used when the caller names
// none (privacyIDEA's routes).
const (
	ActionCheck   = "POST /validate/check"
	ActionTrigger = "POST /validate/triggerchallenge"
	ActionPoll    = "GET /validate/polltransaction"
)

// Authentication outcomes, as the audit's authentication column and the
// authentication records name them.
const (
	AuthAccept    = "ACCEPT"
	AuthReject    = "REJECT"
	AuthChallenge = "CHALLENGE"
)

// auditor is the audit entry of one request: the validator writes it
// itself, in the transaction that commits the request's token changes
// when nothing after that commit can change the answer, otherwise after
// the decision with a context the client's departure does not cancel.
type auditor struct {
	v       *Validator
	r       Request
	action  string
	started time.Time
	// counted marks the operations whose outcome auth_max_fail and
	// auth_max_success count (check).
	counted bool
	// written is set when the entry committed with the token changes.
	written bool
	// event is the operation's event name (EventCheck, ...).
	event string
	// last is the entry written (or being written in the commit), for
	// the post event handlers; kept only when there are some.
	last *audit.Entry
	// pol are the request's policies once the request got that far (nil
	// before): the entry lists those that took effect, and the
	// authentication record counts for the user they match (pol.u).
	pol *policies
}

// keep remembers e for the post event handlers.
func (a *auditor) keep(e audit.Entry) {
	if a.v.cfg.Events != nil {
		kept := new(audit.Entry)
		*kept = e
		a.last = kept
	}
}

func (v *Validator) newAuditor(r Request, action, event string, counted bool) *auditor {
	if r.Caller.Action != "" {
		action = r.Caller.Action
	}
	return &auditor{v: v, r: r, action: action, event: event, started: v.cfg.Now(), counted: counted}
}

// authentication is the authentication column of an answer.
func authentication(res Response) string {
	switch {
	case !res.NoDetail && len(res.Challenges) > 0:
		return AuthChallenge
	case res.Value:
		return AuthAccept
	}
	return AuthReject
}

// entry is the audit entry of the answer res (or err), with the names of
// the policies that decided.
func (a *auditor) entry(res Response, used []string, err error) audit.Entry {
	var e audit.Entry
	who := a.r.Caller
	end := a.v.cfg.Now()
	e.Action = audit.Text(a.action, 256)
	e.StartDate, e.Date = a.started.UTC(), end.UTC()
	e.Duration = end.Sub(a.started).Seconds()
	if who.Client.IsValid() {
		e.Client = who.Client.String()
	}
	name, version := audit.SplitAgent(who.UserAgent)
	e.UserAgent, e.UserAgentVersion = audit.Text(name, 64), audit.Text(version, 64)
	e.Node = a.v.cfg.NodeName
	e.ThreadID = strconv.FormatInt(a.v.seq.Add(1), 10)
	noUser := errors.Is(err, ErrTriggerNoUser)
	if err == nil {
		if res.User.Login != "" {
			e.User, e.Realm, e.Resolver = res.User.Login, res.User.Realm, res.User.Resolver
		}
		if !res.NoDetail {
			e.Serial, e.TokenType, e.Info = res.Serial, res.Type, audit.Text(res.Message, 256)
		}
	}
	switch who.Role {
	case caller.Admin:
		if a.event == EventTrigger {
			// The administrator whose right triggered it (a JWT that
			// came along with a check names nobody).
			e.Administrator = who.Name
		}
	case caller.User:
		if e.User == "" {
			e.User, e.Realm = who.Name, who.Realm
		}
	}
	fill := func(dst *string, v string) {
		if *dst == "" && v != "" {
			*dst = audit.Text(v, 256)
		}
	}
	fill(&e.User, a.r.User)
	fill(&e.Realm, a.r.Realm)
	fill(&e.Resolver, a.r.Resolver)
	fill(&e.Serial, a.r.Serial)
	fill(&e.TokenType, a.r.Type)
	ps := append(slices.Clone(a.r.PriorPolicies), used...)
	ps = slices.DeleteFunc(ps, func(s string) bool { return s == "" })
	if len(ps) > 0 {
		slices.Sort(ps)
		e.Policies = strings.Join(slices.Compact(ps), ",")
	}
	switch {
	case noUser:
		e.Info = audit.Text(ErrTriggerNoUser.Error(), 256)
		e.Authentication, e.Success = AuthReject, false
	case err != nil:
		if _, _, msg, _, internal := apierr.Wire(err); !internal {
			e.Info = audit.Text(msg, 512)
		}
	default:
		e.Authentication = authentication(res)
		e.Success = e.Authentication == AuthAccept
	}
	return e
}

// outcome is the authentication result to count for the answer (""
// when nothing is counted).
func (a *auditor) outcome(res Response, err error) string {
	if !a.counted {
		return ""
	}
	if err != nil {
		return AuthReject
	}
	if res.Challenge || len(res.Challenges) > 0 {
		return AuthChallenge
	}
	return authentication(res)
}

// inTx prepares the write of the entry of res, the answer the request
// will give when the transaction it is handed to commits, and of its
// authentication record. The caller sets a.written once that commit
// succeeded.
func (a *auditor) inTx(res Response) func(store.Tx) error {
	l := a.v.cfg.Audit
	if l == nil {
		return nil
	}
	e := a.entry(res, a.used(), nil)
	a.keep(e)
	p := l.Prepare(e)
	rec := a.record(a.outcome(res, nil))
	return func(tx store.Tx) error {
		if _, err := l.WritePrepared(tx, p); err != nil {
			return err
		}
		if rec == nil {
			return nil
		}
		return rec(tx)
	}
}

// used are the names of the policies that took effect so far.
func (a *auditor) used() []string {
	if a.pol == nil {
		return nil
	}
	return a.pol.used
}

// record returns the write of the authentication record of the request's
// user, or nil when nothing is counted.
func (a *auditor) record(result string) func(store.Tx) error {
	if result == "" || a.pol == nil || a.pol.u.Login == "" || a.v.cfg.Store == nil || !countingPolicies(a.pol.snap) {
		return nil
	}
	return a.v.authRecord(a.pol.u.Login, a.pol.u.Realm, result, a.v.cfg.Now())
}

// finish writes the entry of the answer unless it committed with the
// token changes. The write does not stop when the client leaves; when it
// fails, the answer becomes an error (an answer is never given
// without its entry).
func (a *auditor) finish(ctx context.Context, res Response, err error) (Response, error) {
	used := a.used()
	res.Policies = used
	if a.written {
		return res, err
	}
	e := a.entry(res, used, err)
	a.keep(e)
	if a.v.cfg.Audit == nil {
		return res, err
	}
	ctx = context.WithoutCancel(ctx)
	var werr error
	if rec := a.record(a.outcome(res, err)); rec == nil {
		_, werr = a.v.cfg.Audit.Write(ctx, e)
	} else {
		p := a.v.cfg.Audit.Prepare(e)
		werr = a.v.cfg.Store.Update(ctx, func(tx store.Tx) error {
			if _, err := a.v.cfg.Audit.WritePrepared(tx, p); err != nil {
				return err
			}
			return rec(tx)
		})
	}
	if werr != nil {
		res.Value = false
		if errors.Is(werr, store.ErrWriteFailed) {
			// The store refuses writes (a full disk): the caller maps the
			// error to apierr.StoreWrite; the store's failure is logged
			// once, when it begins.
			return res, werr
		}
		zerolog.Ctx(ctx).Error().Err(werr).Str("component", "audit").Str("request_id", a.r.Caller.RequestID).Msg("audit write failed")
		return res, apierr.New(apierr.Server, "Internal server error.")
	}
	return res, err
}
