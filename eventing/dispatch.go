package eventing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// Run runs the active definitions of c.Event at position (Pre or Post) in
// their order. Each whose conditions hold writes its own audit entry and
// runs its action. An action's failure is audited and logged and the
// operation goes on, unless the definition has abort_on_error or the
// module returned an *Abort: then Run returns that error and runs no
// further definition.
func (s *Service) Run(ctx context.Context, position string, c *Call) error {
	defs, err := s.active(ctx, c.Event, position)
	if err != nil {
		s.cfg.Log.Error().Err(err).Str("component", "eventing").Str("event", c.Event).Msg("reading event handler definitions failed")
		return nil
	}
	if len(defs) == 0 {
		return nil
	}
	f := &facts{}
	for _, d := range defs {
		m, ok := s.Module(d.HandlerModule)
		if !ok {
			s.cfg.Log.Error().Str("component", "eventing").Str("event", c.Event).Str("handler", d.Name).
				Str("module", d.HandlerModule).Msg("event handler definition names an unknown module")
			continue
		}
		r := &Run{Def: d, Call: c, Position: position, svc: s, facts: f}
		hold, err := r.conditionsHold(ctx)
		if err != nil {
			s.failed(ctx, r, err)
			if d.AbortOnError {
				return err
			}
			continue
		}
		if !hold {
			continue
		}
		r.started = s.now()
		err = runModule(ctx, m, r)
		if err == nil {
			if !r.written {
				s.audit(ctx, r, r.started, true, d.Name)
			}
			continue
		}
		s.failed(ctx, r, err)
		var ab *Abort
		if d.AbortOnError || errors.As(err, &ab) {
			return err
		}
	}
	return nil
}

// runModule runs m for r and turns a panic into an error.
func runModule(ctx context.Context, m Module, r *Run) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("eventing: handler module %s panicked: %v", m.Name(), p)
		}
	}()
	return m.Do(ctx, r)
}

func (s *Service) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// failed audits and logs a handler's failure.
func (s *Service) failed(ctx context.Context, r *Run, err error) {
	s.cfg.Log.Warn().Err(err).Str("component", "eventing").Str("event", r.Call.Event).Str("handler", r.Def.Name).
		Str("module", r.Def.HandlerModule).Str("action", r.Def.Action).Str("request_id", r.Call.Caller.RequestID).
		Msg("event handler failed")
	s.audit(ctx, r, s.now(), false, r.Def.Name+" ("+errorClass(err)+")")
}

// errorClass names err's kind for the failure audit entry, as
// privacyIDEA names the exception class.
func errorClass(err error) string {
	var ab *Abort
	if errors.As(err, &ab) {
		return "Abort"
	}
	if e, ok := errors.AsType[*apierr.Error](err); ok {
		if name, ok := errorClasses[e.Code]; ok {
			return name
		}
		return "PrivacyIDEAError"
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" || t.Name() == "errorString" || t.Name() == "wrapError" {
		return "Error"
	}
	return t.Name()
}

// errorClasses are privacyIDEA's exception class names of the error kinds
// a handler may raise.
var errorClasses = map[apierr.Code]string{
	apierr.Parameter: "ParameterError", apierr.User: "UserError", apierr.ResourceNotFound: "ResourceNotFoundError",
	apierr.Policy: "PolicyError", apierr.TokenAdmin: "TokenAdminError", apierr.ConfigAdmin: "ConfigAdminError",
	apierr.Validate: "ValidateError", apierr.Server: "ServerError",
}

// InTx returns a store hook that writes the run's audit entry (a success)
// in the transaction of the module's own change, so that the change and
// its entry commit together; the dispatcher then writes no other entry
// for the run. Pass it as the also hook of the token, user or counter
// write. When the change fails the dispatcher audits the failure.
// The entry is made when InTx is called (it may read the store; the hook
// must not).
func (r *Run) InTx(ctx context.Context) func(store.Tx) error {
	if r.svc.cfg.Audit == nil {
		return func(store.Tx) error { return nil }
	}
	e := r.svc.entry(ctx, r, r.started, true, r.Def.Name)
	return func(tx store.Tx) error {
		r.written = false
		if _, err := r.svc.cfg.Audit.WriteTx(tx, e); err != nil {
			return err
		}
		r.written = true
		return nil
	}
}

// Detach is for a module whose action completes in the background
// (Service.Background): the dispatcher writes no entry for the run when
// Do returns nil; the module calls the function returned, once, when the
// action is done (err nil: success), and that writes the run's entry.
// The entry is made now; the operation does not wait for it.
func (r *Run) Detach(ctx context.Context) func(err error) {
	r.written = true
	s := r.svc
	e := s.entry(ctx, r, r.started, true, r.Def.Name)
	return func(err error) {
		if s.cfg.Audit == nil {
			return
		}
		end := s.now()
		e.Date, e.Duration = end.UTC(), end.Sub(r.started).Seconds()
		if err != nil {
			e.Success, e.Info = false, audit.Text(r.Def.Name+" ("+errorClass(err)+")", 512)
		}
		// Neither the operation nor the background worker waits for
		// the entry: the entries of background work are written in
		// batches, one commit (and one seal) for many.
		s.hooks.auditLater(e)
	}
}

// audit writes the entry of one handler run.
func (s *Service) audit(ctx context.Context, r *Run, started time.Time, success bool, info string) {
	if s.cfg.Audit == nil {
		return
	}
	if _, err := s.cfg.Audit.Write(context.WithoutCancel(ctx), s.entry(ctx, r, started, success, info)); err != nil {
		s.cfg.Log.Error().Err(err).Str("component", "audit").Str("handler", r.Def.Name).Msg("event handler audit write failed")
	}
}

// entry is the audit entry of one handler run.
func (s *Service) entry(ctx context.Context, r *Run, started time.Time, success bool, info string) audit.Entry {
	c := r.Call
	pos := "POST-EVENT "
	if r.Position == Pre {
		pos = "PRE-EVENT "
	}
	end := s.now()
	e := audit.Entry{
		StartDate: started.UTC(), Date: end.UTC(), Duration: end.Sub(started).Seconds(),
		Action:  audit.Text(pos+c.Event+">>"+r.Def.HandlerModule+":"+r.Def.Action, 256),
		Success: success, Info: audit.Text(info, 512),
		Serial: audit.Text(c.Serial, 256), TokenType: audit.Text(c.TokenType, 30),
		User: c.User.Login, Realm: c.User.Realm, Resolver: c.User.Resolver,
		Node: s.cfg.Node, ThreadID: c.Caller.RequestID,
	}
	if e.Serial == "" {
		if t, ok := r.Token(ctx); ok {
			e.Serial, e.TokenType = t.Serial, t.Type
		}
	}
	switch c.Caller.Role {
	case caller.Admin:
		e.Administrator = c.Caller.Name
	case caller.Local:
		e.Administrator = "local"
	}
	if c.Caller.Client.IsValid() {
		e.Client = c.Caller.Client.String()
	}
	name, version := audit.SplitAgent(c.Caller.UserAgent)
	e.UserAgent, e.UserAgentVersion = audit.Text(name, 64), audit.Text(version, 64)
	return e
}

// facts are what the definitions of one call look up, read once and
// shared by them (the token, the user's data).
type facts struct {
	tokenDone bool
	tok       *token.Token

	userDone bool
	usr      user.User

	infoDone bool
	info     map[string]string
}

// Token returns the call's single token: the one of the request's serial
// (or the answer's detail serial), or else the user's token when the user
// has exactly one. The token is read fresh once per call; handlers that
// change it see the state before the change.
func (r *Run) Token(ctx context.Context) (*token.Token, bool) {
	f := r.facts
	if f.tokenDone {
		return f.tok, f.tok != nil
	}
	f.tokenDone = true
	s := r.svc
	if s.cfg.Tokens == nil {
		return nil, false
	}
	serial := r.Call.Serial
	if serial == "" {
		serial = r.Call.Param("serial")
	}
	if serial == "" && r.Call.Response != nil {
		if v, ok := r.Call.Response.Detail["serial"].(string); ok {
			serial = v
		}
	}
	if serial != "" {
		if t, err := s.cfg.Tokens.Get(ctx, serial); err == nil {
			f.tok = t
		}
		return f.tok, f.tok != nil
	}
	u := r.User(ctx)
	if u.Login == "" {
		return nil, false
	}
	ts, err := s.cfg.Tokens.ByOwner(ctx, u)
	if err == nil && len(ts) == 1 {
		f.tok = ts[0]
	}
	return f.tok, f.tok != nil
}

// RefreshToken forgets the token read for this call, so that the next
// Token call reads it again (after a handler changed it).
func (r *Run) RefreshToken() { r.facts.tokenDone, r.facts.tok = false, nil }

// User returns the call's user: the request's user as the operation
// resolved it, or else the owner of the request's token. Zero when there
// is none.
func (r *Run) User(ctx context.Context) user.User {
	f := r.facts
	if f.userDone {
		return f.usr
	}
	f.userDone = true
	if r.Call.User.Login != "" {
		f.usr = r.Call.User
		if !f.usr.Found() && r.svc.cfg.Realms != nil {
			if u, _, err := r.resolve(ctx, f.usr); err == nil {
				f.usr = u
			}
		}
		return f.usr
	}
	serial := r.Call.Serial
	if serial == "" {
		serial = r.Call.Param("serial")
	}
	if serial != "" && r.svc.cfg.Tokens != nil {
		if t, err := r.svc.cfg.Tokens.Get(ctx, serial); err == nil && t.Owner != nil {
			f.usr = *t.Owner
		}
	}
	return f.usr
}

func (r *Run) resolve(ctx context.Context, u user.User) (user.User, bool, error) {
	if u.Resolver != "" {
		got, _, err := r.svc.cfg.Realms.ResolveIn(ctx, u.Login, u.Realm, u.Resolver)
		return got, err == nil, err
	}
	got, _, err := r.svc.cfg.Realms.Resolve(ctx, u.Login, u.Realm)
	return got, err == nil, err
}

// UserInfo returns the attributes of the call's user from the user store
// and the custom attributes (empty when there is no user).
func (r *Run) UserInfo(ctx context.Context) map[string]string {
	f := r.facts
	if f.infoDone {
		return f.info
	}
	f.infoDone = true
	f.info = r.svc.UserInfo(ctx, r.User(ctx))
	return f.info
}

// UserInfo returns the attributes of u from its user store plus its
// custom attributes (empty for an unknown user).
func (s *Service) UserInfo(ctx context.Context, u user.User) map[string]string {
	out := map[string]string{}
	if u.Login == "" || s.cfg.Realms == nil {
		return out
	}
	var (
		got user.User
		err error
	)
	var info map[string]string
	if u.Resolver != "" {
		g, in, e := s.cfg.Realms.ResolveIn(ctx, u.Login, u.Realm, u.Resolver)
		got, err = g, e
		if err == nil && in != nil {
			if i, e := in.User(ctx, got.UID); e == nil {
				info = i.Strings()
			}
		}
	} else {
		g, in, e := s.cfg.Realms.Resolve(ctx, u.Login, u.Realm)
		got, err = g, e
		if err == nil && in != nil {
			if i, e := in.User(ctx, got.UID); e == nil {
				info = i.Strings()
			}
		}
	}
	for k, v := range info {
		if k != "password" {
			out[k] = v
		}
	}
	if err == nil && s.cfg.Attrs != nil {
		if attrs, e := s.cfg.Attrs.Get(ctx, got); e == nil {
			for k, v := range attrs {
				out[k] = v
			}
		}
	}
	return out
}

// toString renders a JSON-ish value as privacyIDEA's str() would for the
// values handlers compare (numbers without a trailing .0).
func toString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case fmt.Stringer:
		return x.String()
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// ParamString renders a request parameter's value as a definition's
// option or condition stores it: text as it is, True/False, numbers
// without a trailing .0, lists and objects as JSON.
func ParamString(v any) string { return toString(v) }

// IsTrue is privacyIDEA's is_true: 1, "1", true and "true" in any case.
func IsTrue(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int:
		return x == 1
	case int64:
		return x == 1
	case float64:
		return x == 1
	case string:
		return x == "1" || strings.EqualFold(x, "true")
	}
	return false
}

// Background runs fn outside the request, on a bounded queue: side effects
// that must not hold up the operation (webhooks). When the queue is full
// (or the service is closed) the work is dropped, logged, and Background
// returns ErrBusy; a nil fn is work a module did not prepare because the
// queue was full (Busy), counted as dropped.
func (s *Service) Background(name string, fn func(ctx context.Context)) error {
	if fn == nil {
		s.hooks.drop(name)
		return ErrBusy
	}
	if !s.hooks.submit(name, fn) {
		return ErrBusy
	}
	return nil
}

// Busy reports whether the background queue is full, so that a module
// can skip preparing work that Background would drop.
func (s *Service) Busy() bool { return len(s.hooks.ch) == cap(s.hooks.ch) }

// ErrBusy is the failure of work the background queue had no room for.
var ErrBusy = apierr.New(apierr.Server, "The event handler's background queue is full.")

// hookQueue is a small pool of workers for Background.
type hookQueue struct {
	s    *Service
	once sync.Once
	ch   chan backgroundJob
	stop chan struct{}
	wg   sync.WaitGroup
	ctx  context.Context
	quit context.CancelFunc

	dropped, logged, lastLog atomic.Int64

	// audits are the entries of dropped work, written by one goroutine.
	audits chan audit.Entry
}

type backgroundJob struct {
	name string
	fn   func(ctx context.Context)
}

const (
	backgroundWorkers = 64
	backgroundQueue   = 4096
)

func (q *hookQueue) init(s *Service) {
	q.s = s
	q.ch = make(chan backgroundJob, backgroundQueue)
	q.audits = make(chan audit.Entry, backgroundQueue)
	q.stop = make(chan struct{})
	q.ctx, q.quit = context.WithCancel(context.Background())
}

// auditLater queues the entry of background work for the batch writer;
// when even that queue is full the entry is lost, and counted in the log.
func (q *hookQueue) auditLater(e audit.Entry) {
	q.once.Do(q.start)
	select {
	case q.audits <- e:
	default:
		q.s.cfg.Log.Error().Str("component", "audit").Msg("event handler audit queue is full: entry lost")
	}
}

// maxAuditBatch bounds the entries of one batch commit.
const maxAuditBatch = 256

// writeAudits writes first and whatever else is queued, in one commit.
func (q *hookQueue) writeAudits(first audit.Entry) {
	batch := []audit.Entry{first}
	for len(batch) < maxAuditBatch {
		select {
		case e := <-q.audits:
			batch = append(batch, e)
			continue
		default:
		}
		break
	}
	err := q.s.cfg.Store.Update(context.Background(), func(tx store.Tx) error {
		for _, e := range batch {
			if _, err := q.s.cfg.Audit.WriteTx(tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		q.s.cfg.Log.Error().Err(err).Str("component", "audit").Int("entries", len(batch)).Msg("event handler audit write failed")
	}
}

func (q *hookQueue) start() {
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		for {
			select {
			case <-q.stop:
				return
			case e := <-q.audits:
				if q.s.cfg.Audit != nil {
					q.writeAudits(e)
				}
			}
		}
	}()
	for range backgroundWorkers {
		q.wg.Add(1)
		go func() {
			defer q.wg.Done()
			for {
				select {
				case <-q.stop:
					return
				case j := <-q.ch:
					q.run(j)
				}
			}
		}()
	}
}

func (q *hookQueue) run(j backgroundJob) {
	defer func() {
		if p := recover(); p != nil {
			q.s.cfg.Log.Error().Str("component", "eventing").Str("job", j.name).Interface("panic", p).Msg("background event work panicked")
		}
	}()
	j.fn(q.ctx)
}

func (q *hookQueue) submit(name string, fn func(ctx context.Context)) bool {
	q.once.Do(q.start)
	select {
	case <-q.stop:
		return false
	default:
	}
	select {
	case q.ch <- backgroundJob{name: name, fn: fn}:
		return true
	default:
		q.drop(name)
		return false
	}
}

// drop counts work the queue had no room for; it is logged at most once
// a second, with the number dropped since.
func (q *hookQueue) drop(name string) {
	n := q.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := q.lastLog.Load(); now-last >= int64(time.Second) && q.lastLog.CompareAndSwap(last, now) {
		q.s.cfg.Log.Error().Str("component", "eventing").Str("job", name).Int64("dropped", n-q.logged.Swap(n)).
			Msg("background event queue is full: work dropped")
	}
}

func (q *hookQueue) close() {
	select {
	case <-q.stop:
		return
	default:
	}
	close(q.stop)
	q.quit()
	q.wg.Wait()
	// The entries of the work that ran are written before the store
	// closes.
	for {
		select {
		case e := <-q.audits:
			if q.s.cfg.Audit != nil {
				q.writeAudits(e)
			}
			continue
		default:
		}
		return
	}
}

// Wait blocks until the background queue is empty (tests).
func (s *Service) Wait(ctx context.Context) error {
	for len(s.hooks.ch) > 0 || len(s.hooks.audits) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
