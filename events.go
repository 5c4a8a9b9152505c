package authsrv

import (
	"context"
	"maps"
	"net/http"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/user"
	"github.com/authsrv/authsrv/validate"
)

// Exchange is what the event handler definitions read and change of one
// request beyond its typed form: the request's HTTP form and parameters,
// and the answer when a post handler changed it. A caller that wants the
// handlers to see its parameters, or that answers in privacyIDEA's JSON
// form, passes one with WithExchange; the server does for every request.
type Exchange struct {
	// Method and Path are the HTTP form of the operation ("POST",
	// "/validate/check"); empty for a Go caller, which then gets the
	// operation's own path.
	Method, Path string
	// Params are the request's parameters. The library only reads them,
	// and hands the handlers a copy without the password ("pass",
	// "password").
	Params map[string]any
	// Response is set after the operation when a post handler changed
	// its answer (a ResponseMangler, a Federation forward): the caller
	// answers this instead of the operation's own.
	Response *eventing.Response
}

type exchangeKey struct{}

// WithExchange returns ctx carrying x for the operations called with it.
func WithExchange(ctx context.Context, x *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// ExchangeFrom returns the exchange of ctx (nil without one).
func ExchangeFrom(ctx context.Context) *Exchange {
	x, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return x
}

// Events returns the event handler service: its definitions (through Ops
// for audited changes), the registered handler modules and the Counter
// module's counters.
func (s *Server) Events() *eventing.Service { return s.events }

// firedEvents are the privacyIDEA event names the operations of the
// library fire (TestFiredEvents keeps the list true).
var firedEvents = []string{
	"auth", validate.EventCheck, validate.EventTrigger, validate.EventPoll,
	"token_init", "token_list", "token_info", "token_assign", "token_unassign", "token_delete", "token_enable",
	"token_disable", "token_revoke", "token_reset", "token_resync", "token_set", "token_setpin",
	"token_setrandompin", "token_realm", "token_copypin", "token_copyuser", "token_lost", "token_load",
	"token_getserial", "token_getchallenges", "token_cancelchallenge",
	"user_list", "user_add", "user_update", "user_delete",
	"set_custom_user_attribute", "get_user_attribute", "get_editable_attributes", "delete_custom_user_attribute",
	eventOfflineRefill,
	"serviceid_add", "serviceid_list", "serviceid_delete",
	"subscription_get", "subscription_status", "subscription_save", "subscription_delete",
}

// newCall is the eventing view of one operation.
func (s *Server) newCall(ctx context.Context, event, method, path string, who caller.Caller, e audit.Entry) *eventing.Call {
	c := &eventing.Call{Event: event, Caller: who, Method: method, Path: path, Entry: e,
		User: user.User{Login: e.User, Realm: e.Realm, Resolver: e.Resolver}, Serial: e.Serial, TokenType: e.TokenType}
	x := ExchangeFrom(ctx)
	src := who.Data
	if x != nil && x.Params != nil {
		src = x.Params
	}
	c.Params = make(map[string]any, len(src))
	for k, v := range src {
		if k != "pass" && k != "password" {
			c.Params[k] = v
		}
	}
	if x != nil && x.Method != "" {
		c.Method, c.Path = x.Method, x.Path
	}
	return c
}

// failure is the response of a failed operation.
func failure(err error) *eventing.Response {
	number, _, msg, _, _ := apierr.Wire(err)
	return &eventing.Response{Status: false, Error: &eventing.ResponseError{Code: number, Message: msg}}
}

// eventsAnswered hands a response that post handlers changed to the
// caller's exchange.
func eventsAnswered(ctx context.Context, res *eventing.Response) {
	if res == nil || !res.Changed {
		return
	}
	if x := ExchangeFrom(ctx); x != nil {
		x.Response = res
	}
}

// validateHook runs the legacy Go event handlers and the event handler
// definitions around the validator's operations.
type validateHook struct {
	s      *Server
	legacy []EventHandler
}

// The HTTP paths of the validator's events, for Federation.
var validatePaths = map[string]string{
	validate.EventCheck:   "/validate/check",
	validate.EventTrigger: "/validate/triggerchallenge",
	validate.EventPoll:    "/validate/polltransaction",
}

// requestParams are the parameters of a validate request as a Go caller
// gave them (never the password).
func requestParams(r *validate.Request) map[string]any {
	p := map[string]any{}
	for k, v := range map[string]string{"user": r.User, "realm": r.Realm, "resolver": r.Resolver, "serial": r.Serial,
		"type": r.Type, "transaction_id": r.TransactionID} {
		if v != "" {
			p[k] = v
		}
	}
	return p
}

func (h *validateHook) Pre(ctx context.Context, name string, r *validate.Request, e audit.Entry) error {
	for _, l := range h.legacy {
		if err := l.Pre(ctx, Event{Name: name, Caller: r.Caller, Entry: e}); err != nil {
			return err
		}
	}
	if !h.s.events.Wants(ctx, name) {
		return nil
	}
	c := h.s.newCall(ctx, name, "POST", validatePaths[name], r.Caller, e)
	if ExchangeFrom(ctx) == nil || len(c.Params) == 0 {
		maps.Copy(c.Params, requestParams(r))
	}
	c.TransactionID = r.TransactionID
	c.Pass = r.Pass
	// A request mangler's changes to the parameters that make the
	// request apply to it; parameters no handler changed keep the
	// request's own reading of them.
	fields := map[string]*string{"user": &r.User, "realm": &r.Realm, "resolver": &r.Resolver,
		"serial": &r.Serial, "type": &r.Type, "transaction_id": &r.TransactionID}
	before := make(map[string]string, len(fields))
	for k := range fields {
		before[k] = c.Param(k)
	}
	err := h.s.events.Run(ctx, eventing.Pre, c)
	for k, field := range fields {
		if now := c.Param(k); now != before[k] {
			*field = now
		}
	}
	return err
}

func (h *validateHook) Post(ctx context.Context, name string, r validate.Request, e audit.Entry, res validate.Response, err error) error {
	if name == validate.EventCheck {
		// The client application record comes last, after the post
		// event handlers.
		defer h.s.recordClient(r.Caller)
	}
	for _, l := range h.legacy {
		l.Post(ctx, Event{Name: name, Caller: r.Caller, Entry: e, Err: err})
	}
	if !h.s.events.Wants(ctx, name) {
		return nil
	}
	c := h.s.newCall(ctx, name, "POST", validatePaths[name], r.Caller, e)
	if ExchangeFrom(ctx) == nil || len(c.Params) == 0 {
		maps.Copy(c.Params, requestParams(&r))
	}
	c.Pass = r.Pass
	if res.User.Login != "" {
		c.User = res.User
	} else if c.User.Login == "" && r.User != "" {
		c.User = user.User{Login: r.User, Realm: r.Realm, Resolver: r.Resolver}
	}
	if res.Serial != "" {
		c.Serial, c.TokenType = res.Serial, res.Type
	} else if c.Serial == "" {
		c.Serial = r.Serial
	}
	c.TransactionID = res.TransactionID
	if c.TransactionID == "" {
		c.TransactionID = r.TransactionID
	}
	c.Err = err
	if err != nil {
		c.Response = failure(err)
	} else {
		switch name {
		case validate.EventTrigger:
			c.Response = &eventing.Response{Status: true, Value: len(res.Challenges), Detail: res.TriggerDetail()}
		case validate.EventPoll:
			c.Response = &eventing.Response{Status: true, Value: res.Value, Detail: map[string]any{"challenge_status": res.ChallengeStatus}}
		default:
			c.Response = &eventing.Response{Status: true, Value: res.Value, Detail: res.Detail()}
		}
	}
	perr := h.s.events.Run(ctx, eventing.Post, c)
	eventsAnswered(ctx, c.Response)
	return perr
}

// AttachToken attaches a token to an application for the Token handler's
// attach application action, through the audited operation.
func (h eventHost) AttachToken(ctx context.Context, serial, application, hostname string, options map[string]string) error {
	who := caller.Caller{Role: caller.Local, Action: "POST /machine/token (event handler)"}
	_, err := h.s.ops.AttachMachineToken(context.WithoutCancel(ctx), who, machine.AttachRequest{Serial: serial,
		Application: application, Machine: machine.MachineRef{Hostname: hostname}, Options: options})
	return err
}

// eventHTTPClient is the client of the WebHook and Federation modules:
// through the dial policy, no redirects followed, and as many idle
// connections per receiver as the background queue has workers (the
// default two would open a connection per webhook under load).
func eventHTTPClient(p *netguard.Policy) *http.Client {
	c := p.HTTPClient(0, 0)
	if tr, ok := c.Transport.(*http.Transport); ok {
		tr.MaxIdleConnsPerHost = 64
	}
	return c
}

// eventHost is what the handler modules need of the library.
type eventHost struct{ s *Server }

// EnrollToken enrolls a token for the Token handler's enroll action as
// the trusted local administrator, through the audited operation.
func (h eventHost) EnrollToken(ctx context.Context, typ string, owner *user.User, params map[string]string) (string, error) {
	req := TokenInit{Type: typ, Params: map[string]string{}}
	maps.Copy(req.Params, params)
	if owner != nil {
		req.User = Target{User: owner.Login, Realm: owner.Realm, Resolver: owner.Resolver}
	} else if params["realm"] != "" {
		req.Realm = params["realm"]
	}
	who := caller.Caller{Role: caller.Local, Action: "POST /token/init (event handler)"}
	res, err := h.s.ops.InitToken(context.WithoutCancel(ctx), who, req)
	if err != nil {
		return "", err
	}
	return res.Serial, nil
}
